import { strict as assert } from 'node:assert';
import { describe, it } from 'node:test';
import type { ArchiveBatch, ArchiveEntry, ArchiveSink } from '../contract/archive-sink';
import type { OperationRecord, RunRecord } from '../contract/checkpoint-store';
import type { StoredStreamEvent } from '../contract/run-stream';
import { stepRecord, withCode } from './store-records';

/** What a sink's test file hands the archive conformance suite for each test. */
export interface ArchiveSinkFixture {
  /** A sink over an empty archive of its own (a temp directory, a bucket prefix named from the test). */
  sink: ArchiveSink;
  /** Removes what the test archived and closes what the fixture opened. */
  cleanup: () => Promise<void>;
  /** Changes some bytes of the stored object of `entry` behind the sink's back (a tampered archive). */
  alter: (entry: ArchiveEntry) => Promise<void>;
}

export interface ArchiveSinkConformanceOptions {
  /** Names the suite in the test output. */
  name: string;
  /** A fresh sink for one test, isolated by `testName`; the suite always calls its `cleanup`. */
  makeSink: (testName: string) => Promise<ArchiveSinkFixture>;
}

/** Payload text a JSON, URL or gzip round trip could get wrong. */
const TRICKY = '{"text":"ünï \\u2028 \\"quoted\\" 🚀 \\\\ </script> %2F ../"}';

/**
 * The conformance suite of the `ArchiveSink` contract, for the built-in sinks (gzip files, S3) and yours
 * (GCS, Azure): a batch reads back exactly as written, the same batch written again stores no second
 * copy, a run's entries are found by its id and kept apart from other runs' (ids with `/`, `.`, `%`), and
 * an altered object is refused as `CHECKPOINT_CORRUPTED`. Registers `node:test` blocks: call it at the top
 * level of a test file.
 *
 * @example
 * import { runArchiveSinkConformance } from 'waypoint-durable/testing';
 * runArchiveSinkConformance({
 *   name: 'gcs',
 *   makeSink: async (testName) => {
 *     const prefix = `t-${hash(testName)}/`;
 *     return { sink: new GcsArchiveSink({ bucket, prefix }), cleanup: () => deletePrefix(prefix), alter: (e) => flipAByte(prefix, e) };
 *   },
 * });
 */
export function runArchiveSinkConformance(options: ArchiveSinkConformanceOptions): void {
  const test = (title: string, fn: (fx: ArchiveSinkFixture) => Promise<void>): void => {
    it(title, async () => {
      const fx = await options.makeSink(`${options.name} archive conformance: ${title}`);
      try {
        await fn(fx);
      } finally {
        await fx.cleanup();
      }
    });
  };

  describe(`${options.name}: archive sink conformance`, () => {
    test('a prune batch (run row, rows, operations) reads back exactly as written, instants as Dates', async ({ sink }) => {
      const batch = pruneBatch('run-1', 1, 4);
      const entry = await sink.write(batch);
      assert.equal(entry.runId, 'run-1');
      assert.equal(entry.kind, 'prune');
      assert.deepEqual([entry.fromSequence, entry.toSequence, entry.rows], [1, 4, 4]);
      assert.equal(entry.lastDigest, batch.steps[3].sha256);
      assert.match(entry.sha256, /^[0-9a-f]{64}$/);
      assert.ok(entry.bytes > 0);
      const listed = await sink.entries('run-1');
      assert.equal(listed.length, 1);
      assert.equal(listed[0].key, entry.key);
      assert.ok(listed[0].archivedAt instanceof Date);
      assert.deepEqual(await sink.read(listed[0]), batch);
    });

    test('the same batch written again stores no second copy (same key, one entry)', async ({ sink }) => {
      const batch = compactionBatch('run-1', 1, 3);
      const first = await sink.write(batch);
      const again = await sink.write(compactionBatch('run-1', 1, 3));
      assert.equal(again.key, first.key);
      assert.equal(again.sha256, first.sha256);
      assert.equal((await sink.entries('run-1')).length, 1);
    });

    test("a run's entries come in range order, apart from other runs'; runIds lists every run archived", async ({ sink }) => {
      const ids = ['a/b', 'a', '..', 'ünï 🚀 %2F'];
      await sink.write(compactionBatch('a', 4, 6));
      await sink.write(compactionBatch('a', 1, 3));
      for (const id of ids.filter((x) => x !== 'a')) await sink.write(pruneBatch(id, 1, 2));
      assert.deepEqual(
        (await sink.entries('a')).map((e) => [e.fromSequence, e.toSequence, e.kind]),
        [
          [1, 3, 'compaction'],
          [4, 6, 'compaction'],
        ],
      );
      for (const id of ids.filter((x) => x !== 'a')) {
        const [entry, ...more] = await sink.entries(id);
        assert.equal(more.length, 0, id);
        assert.deepEqual((await sink.read(entry)).run?.runId, id);
      }
      assert.deepEqual(await sink.entries('nope'), []);
      assert.deepEqual([...(await sink.runIds())].sort(), [...ids].sort());
    });

    test('batches with different rows over the same range are two entries, neither overwritten', async ({ sink }) => {
      const one = compactionBatch('r', 1, 2);
      const other = compactionBatch('r', 1, 2, 'rewritten');
      await sink.write(one);
      await sink.write(other);
      const entries = await sink.entries('r');
      assert.equal(entries.length, 2);
      const read = await Promise.all(entries.map((e) => sink.read(e)));
      assert.deepEqual(read.map((b) => b.steps[1].sha256).sort(), [one.steps[1].sha256, other.steps[1].sha256].sort());
    });

    test('an altered object is refused as CHECKPOINT_CORRUPTED, naming the run', async ({ sink, alter }) => {
      await sink.write(pruneBatch('r', 1, 3));
      const [entry] = await sink.entries('r');
      await alter(entry);
      await assert.rejects(sink.read(entry), (err: Error) => withCode('CHECKPOINT_CORRUPTED')(err) && /'r'/.test(err.message));
    });
  });
}

function runRecord(runId: string, last: number): RunRecord {
  const at = new Date(1_700_000_000_123);
  return {
    runId,
    pipelineName: 'financial-analysis',
    pipelineVersion: '2.1.0',
    status: 'completed',
    cursorAgent: 1,
    cursorStep: 0,
    lastSequence: last,
    input: TRICKY,
    metadata: '{"host":"test"}',
    leaseOwner: null,
    leaseEpoch: 3,
    leaseExpiresAt: null,
    error: null,
    resumeHint: null,
    createdAt: at,
    updatedAt: new Date(at.getTime() + 5_001),
    parentRunId: null,
  };
}

function rows(runId: string, from: number, to: number, salt = '') {
  return Array.from({ length: to - from + 1 }, (_, i) => {
    const sequence = from + i;
    return stepRecord(runId, sequence, { output: sequence === from ? TRICKY : `{"n":${sequence}}`, sha256: `v2:${salt}${runId}:${sequence}`.padEnd(64, '0') });
  });
}

function compactionBatch(runId: string, from: number, to: number, salt = ''): ArchiveBatch {
  return { runId, kind: 'compaction', steps: rows(runId, from, to, salt) };
}

function pruneBatch(runId: string, from: number, to: number): ArchiveBatch {
  const op: OperationRecord = {
    operationKey: `${runId}:op`,
    runId,
    stepKey: 'research/step1',
    name: 'send-report',
    state: 'committed',
    result: TRICKY,
    error: null,
    attempts: 1,
    createdAt: new Date(1_700_000_001_007),
    updatedAt: new Date(1_700_000_001_009),
  };
  // The run's live output, as a prune archives it: a part, its attempt's retraction, a status (read back equal, times included).
  const stream: StoredStreamEvent[] = [
    { offset: 0, kind: 'part', step: 'research/step1', attempt: 1, data: TRICKY, createdAt: new Date(1_700_000_001_010) },
    { offset: 1, kind: 'retract', step: 'research/step1', attempt: 1, createdAt: new Date(1_700_000_001_011) },
    { offset: 2, kind: 'status', status: 'completed', createdAt: new Date(1_700_000_001_012) },
  ];
  return { runId, kind: 'prune', run: runRecord(runId, to), steps: rows(runId, from, to), operations: [op], stream };
}
