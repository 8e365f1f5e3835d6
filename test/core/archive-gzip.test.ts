import 'reflect-metadata';
import { strict as assert } from 'node:assert';
import { appendFileSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { createHash } from 'node:crypto';
import { join } from 'node:path';
import { gzipSync } from 'node:zlib';
import { describe, it } from 'node:test';
import { ContainerModule } from 'inversify';
import {
  GzipFileArchiveSink,
  MemoryCheckpointStore,
  TOKENS,
  Waypoint,
  memoryStorage,
  type StepsChange,
  type StepRecord,
  type WaypointError,
  type WriteOnlyArchiveSink,
} from '../../src/index';
import { objectPath } from '../../src/core/history/archive-objects';
import { runArchiveSinkConformance } from '../../src/testing';
import { syntheticPipeline } from '../helpers/synthetic-pipeline';

/**
 * The gzip file archive: the ArchiveSink conformance suite, and retention's archive, prune and restore on
 * the memory store with it, including files written by the previous release (one .jsonl.gz per run).
 */

runArchiveSinkConformance({
  name: 'gzip files',
  makeSink: () => {
    const dir = mkdtempSync(join(tmpdir(), 'wp-archive-conf-'));
    const sink = new GzipFileArchiveSink(dir);
    return Promise.resolve({
      sink,
      cleanup: () => Promise.resolve(rmSync(dir, { recursive: true, force: true })),
      alter: (entry) => {
        const file = join(dir, objectPath(entry.runId, entry.key));
        const bytes = readFileSync(file);
        bytes[bytes.length >> 1] ^= 0x01;
        writeFileSync(file, bytes);
        return Promise.resolve();
      },
    });
  },
});

const Thirty = syntheticPipeline({ name: 'archive-gzip', steps: 30, payloadBytes: 30, stepsPerAgent: 10 });
const FAR_FUTURE = new Date(Date.now() + 86_400_000);

/**
 * A Waypoint on a memory store whose next `replaceSteps` fails once (after `failNextReplace()`), archiving to
 * a gzip sink in a fresh directory: a store write that fails after the archive upload.
 */
async function failingOnceSetup(prefix: string) {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  const sink = new GzipFileArchiveSink(dir);
  let failNext = false;
  class FailingOnce extends MemoryCheckpointStore {
    override replaceSteps(runId: string, change: StepsChange): Promise<void> {
      if (failNext) {
        failNext = false;
        return Promise.reject(new Error('store went away'));
      }
      return super.replaceSteps(runId, change);
    }
  }
  const store = new FailingOnce();
  const module = new ContainerModule(({ bind }) => {
    bind(TOKENS.CheckpointStore).toConstantValue(store);
  });
  const waypoint = await Waypoint.create({ modules: [module], retention: { keepLast: 5, archive: sink } });
  return { dir, sink, store, waypoint, failNextReplace: () => (failNext = true) };
}

/** The rows of `runId` as the previous release's GzipFileArchiveSink wrote them: one gzip member per call. */
class PreviousReleaseSink implements WriteOnlyArchiveSink {
  constructor(readonly file: string) {}
  archive(_runId: string, rows: readonly StepRecord[]): Promise<void> {
    if (rows.length > 0) appendFileSync(this.file, gzipSync(rows.map((row) => JSON.stringify(row)).join('\n') + '\n'));
    return Promise.resolve();
  }
}

describe('retention with the gzip file archive (memory store)', () => {
  it('compacts and prunes into the archive, restores the run whole: verify, time travel and fork into the archived part', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'wp-archive-'));
    const sink = new GzipFileArchiveSink(dir);
    const waypoint = await Waypoint.create({ modules: [memoryStorage()], retention: { keepLast: 5, compactEvery: 10, archive: sink } });
    try {
      const done = await waypoint.run(Thirty, { runId: 'r/1', input: {} });
      assert.equal(done.status, 'completed');
      const before = await waypoint.checkpoint('r/1');
      assert.ok((await waypoint.store.listSteps('r/1')).length < 30, 'compacted while running');
      assert.deepEqual(await waypoint.retention.prune(FAR_FUTURE), ['r/1']);
      assert.equal(await waypoint.get('r/1'), null);
      const kinds = (await sink.entries('r/1')).map((e) => e.kind);
      assert.ok(kinds.includes('compaction') && kinds.includes('prune'), kinds.join());
      assert.deepEqual(await sink.runIds(), ['r/1']);

      const report = await waypoint.retention.restore('r/1');
      assert.deepEqual([report.restored, report.rows, report.fromSequence, report.toSequence], ['run', 30, 1, 30]);
      await waypoint.verify('r/1');
      assert.equal((await waypoint.get('r/1'))?.status, 'completed');
      assert.deepEqual((await waypoint.checkpoint('r/1')).shared_context, before.shared_context);
      assert.deepEqual(Object.keys((await waypoint.checkpoint('r/1', 3)).shared_context).sort(), ['k0', 'k1', 'k2']);
      const fork = await waypoint.fork('r/1', { newRunId: 'r/1-fork', fromSequence: 3 });
      assert.equal(fork.status, 'paused');
      const resumed = await waypoint.resume('r/1-fork');
      assert.equal(resumed.stepsSkipped, 3);
      assert.equal(resumed.stepsExecuted, 27);
      assert.equal((await waypoint.retention.restore('r/1')).restored, 'nothing', 'a second restore finds every row there');
    } finally {
      await waypoint.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('restores the folded rows of a run compacted by the previous release (its single .jsonl.gz file)', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'wp-archive-legacy-'));
    mkdirSync(dir, { recursive: true });
    const sink = new GzipFileArchiveSink(dir);
    const old = await Waypoint.create({ modules: [memoryStorage()], retention: { keepLast: 5, compactEvery: 10, archive: new PreviousReleaseSink(sink.fileFor('old')) } });
    try {
      await old.run(Thirty, { runId: 'old', input: {} });
      await old.retention.compact('old');
      assert.equal((await old.store.listSteps('old'))[0].stepName, 'base');
      await assert.rejects(old.retention.restore('old'), (e: WaypointError) => e.code === 'INVALID_OPTIONS' && /only writes/.test(e.message));
      const entries = await sink.entries('old');
      assert.deepEqual(
        entries.map((e) => e.kind),
        ['legacy'],
      );
      const report = await old.retention.withOptions({ archive: sink }).restore('old');
      assert.equal(report.restored, 'rows');
      assert.equal(report.fromSequence, 1);
      assert.equal((await old.store.listSteps('old')).length, 30);
      await old.verify('old');
      assert.deepEqual(Object.keys((await old.checkpoint('old', 2)).shared_context).sort(), ['k0', 'k1']);
      // Pruned by the previous release, the run row is nowhere: said, not guessed.
      await old.store.deleteRun('old');
      await assert.rejects(old.retention.withOptions({ archive: sink }).restore('old'), (e: WaypointError) => e.code === 'NOT_ARCHIVED' && /run row/.test(e.message));
      await assert.rejects(old.retention.withOptions({ archive: sink }).restore('never'), (e: WaypointError) => e.code === 'NOT_ARCHIVED');
    } finally {
      await old.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('an archive object forged consistently (rows edited, manifest digest recomputed) is still CHECKPOINT_CORRUPTED, and nothing is restored', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'wp-archive-altered-'));
    const sink = new GzipFileArchiveSink(dir);
    const waypoint = await Waypoint.create({ modules: [memoryStorage()], retention: { keepLast: 5, archive: sink } });
    try {
      await waypoint.run(Thirty, { runId: 'alt', input: {} });
      await waypoint.retention.prune(FAR_FUTURE);
      const [entry] = await sink.entries('alt');
      const file = join(dir, objectPath('alt', entry.key));
      // A consistent forgery of the object (rows edited, object digest recomputed in the manifest) is still caught by the rows' own seals.
      const batch = await sink.read(entry);
      batch.steps[3] = { ...batch.steps[3], output: batch.steps[3].output.replace('x', 'y') };
      const forged = gzipSync(JSON.stringify({ format: 'waypoint-archive/1', ...batch }));
      writeFileSync(file, forged);
      const manifest = join(dir, 'runs', 'alt', 'manifest.json');
      const text = JSON.parse(readFileSync(manifest, 'utf8')) as { entries: { sha256: string }[] };
      text.entries[0].sha256 = createHash('sha256').update(forged).digest('hex');
      writeFileSync(manifest, JSON.stringify(text));
      await assert.rejects(waypoint.retention.restore('alt'), (e: WaypointError) => e.code === 'CHECKPOINT_CORRUPTED' && e.runId === 'alt');
      assert.equal(await waypoint.get('alt'), null, 'nothing written');
    } finally {
      await waypoint.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('a compaction whose store write failed after the upload is retried without a second copy; later ones archive only new rows', async () => {
    const { dir, sink, store, waypoint, failNextReplace } = await failingOnceSetup('wp-archive-retry-');
    try {
      await waypoint.run(Thirty, { runId: 'c', input: {} });
      failNextReplace();
      await assert.rejects(waypoint.retention.compact('c'), /store went away/);
      assert.equal((await store.listSteps('c')).length, 30, 'the rows stay');
      const first = await sink.entries('c');
      assert.deepEqual(
        first.map((e) => [e.kind, e.fromSequence, e.toSequence]),
        [['compaction', 1, 25]],
      );
      assert.equal(await waypoint.retention.compact('c'), 25);
      assert.deepEqual(await sink.entries('c'), first, 'the retry uploaded nothing');
      assert.equal((await store.listSteps('c'))[0].stepName, 'base');
      await waypoint.retention.restore('c');
      assert.equal((await store.listSteps('c')).length, 30);
      await waypoint.verify('c');
      assert.equal(await waypoint.retention.compact('c'), 25);
      assert.deepEqual(await sink.entries('c'), first, 'rows restored and folded again are not archived twice');
    } finally {
      await waypoint.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('a restore that stopped half way (the store failed before the rows) is completed by the next restore', async () => {
    const { dir, store, waypoint, failNextReplace } = await failingOnceSetup('wp-archive-half-');
    try {
      await waypoint.run(Thirty, { runId: 'h', input: {} });
      await waypoint.retention.prune(FAR_FUTURE);
      failNextReplace();
      await assert.rejects(waypoint.retention.restore('h'), /store went away/);
      assert.equal((await store.listSteps('h')).length, 0, 'the run row came back, its rows did not');
      const report = await waypoint.retention.restore('h');
      assert.deepEqual([report.restored, report.rows], ['run', 30]);
      await waypoint.verify('h');
      assert.equal((await waypoint.get('h'))?.status, 'completed');
    } finally {
      await waypoint.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
