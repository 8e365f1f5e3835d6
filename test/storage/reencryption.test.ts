import { strict as assert } from 'node:assert';
import { randomBytes } from 'node:crypto';
import { describe, it } from 'node:test';
import { CheckpointCorruptedError, type WaypointError } from '../../src/contract/errors';
import type { PayloadRewrite, RewriteOutcome } from '../../src/contract/checkpoint-store';
import { EncryptingCheckpointStore, type EncryptionOptions } from '../../src/storage/encrypting-store';
import { MemoryCheckpointStore } from '../../src/storage/memory-store';
import { PayloadCipher } from '../../src/storage/payload-cipher';
import { cursorAt, newRun, stepRecord } from '../helpers/store-records';

/**
 * `EncryptingCheckpointStore.reencryptRun` / `reencryptAll` on the memory store: what is rewritten, what
 * is left, what stops it. The same against the SQL, Redis and tiered stores with a real pipeline:
 * reencryption-backends.test.ts.
 */

const k1 = randomBytes(32);
const k2 = randomBytes(32);
const OLD = { activeKeyId: 'k1', keys: { k1 } };
const ROTATED = { activeKeyId: 'k2', keys: { k1, k2 } };

/** Counts the inner store's calls, and lets a test change a value just before a rewrite lands. */
class WatchedStore extends MemoryCheckpointStore {
  rewrites: PayloadRewrite[] = [];
  listed: { fromSequence?: number; toSequence?: number }[] = [];
  beforeRewrite?: () => Promise<void>;

  override async listSteps(runId: string, range?: { fromSequence?: number; toSequence?: number }) {
    this.listed.push(range ?? {});
    return super.listSteps(runId, range);
  }

  override async rewritePayloads(runId: string, rewrite: PayloadRewrite): Promise<RewriteOutcome> {
    this.rewrites.push(rewrite);
    const racing = this.beforeRewrite;
    this.beforeRewrite = undefined;
    await racing?.();
    return super.rewritePayloads(runId, rewrite);
  }
}

/** A run written under `keys` through the wrapper: input, `steps` steps (memories on odd ones), an error, a committed and a failed operation. */
async function writeRun(inner: MemoryCheckpointStore, keys: EncryptionOptions | null, runId: string, steps: number): Promise<void> {
  const store = keys ? new EncryptingCheckpointStore(inner, keys) : inner;
  await store.createRun(newRun(runId));
  const { epoch } = (await store.acquireLease(runId, 'w', 60_000))!;
  for (let sequence = 1; sequence <= steps; sequence++) await store.appendStep({ step: stepRecord(runId, sequence), run: cursorAt(sequence), fence: { epoch } });
  const fence = { runId, epoch };
  await store.beginOperation({ operationKey: `${runId}/send`, runId, stepKey: 'a/s', name: 'send' }, { epoch });
  await store.finishOperation(`${runId}/send`, { state: 'committed', result: '{"id":1}' }, fence);
  await store.beginOperation({ operationKey: `${runId}/book`, runId, stepKey: 'a/s', name: 'book' }, { epoch });
  await store.finishOperation(`${runId}/book`, { state: 'failed', error: '{"message":"503"}' }, fence);
  await store.updateRun(runId, { status: 'failed', error: '{"message":"boom"}' }, { epoch });
}

/** Every stored payload of the run, as the inner store holds it. */
async function rawPayloads(inner: MemoryCheckpointStore, runId: string): Promise<string[]> {
  const loaded = (await inner.loadRun(runId))!;
  const values = [loaded.run.input, loaded.run.error, ...loaded.steps.flatMap((s) => [s.output, s.memory])];
  for (const op of await inner.listOperations(runId)) values.push(op.result, op.error);
  return values.filter((v): v is string => v !== null);
}

const keyIds = (values: string[]) => new Set(values.map((v) => new PayloadCipher(ROTATED).keyIdOf(v)));

describe('reencryptRun', () => {
  it('rewrites every payload an older key sealed, in chunks of steps, and reads the same afterwards with only the new key', async () => {
    const inner = new WatchedStore();
    await writeRun(inner, OLD, 'r1', 7);
    const before = await new EncryptingCheckpointStore(inner, OLD).loadRun('r1');
    const beforeOps = await new EncryptingCheckpointStore(inner, OLD).listOperations('r1');
    const rotated = new EncryptingCheckpointStore(inner, ROTATED);
    inner.listed = []; // the reads above load through listSteps too (loadRun is derived on the memory store)

    // 2 run payloads + 7 outputs + 4 memories + 2 operation payloads
    assert.deepEqual(await rotated.reencryptRun('r1', { chunkSize: 3 }), { runId: 'r1', rewritten: 15, alreadyCurrent: 0, skipped: 0 });
    assert.deepEqual(inner.listed, [
      { fromSequence: 1, toSequence: 3 },
      { fromSequence: 4, toSequence: 6 },
      { fromSequence: 7, toSequence: 7 },
    ]);
    assert.equal(inner.rewrites.length, 4, 'the run row and operations, then one call per chunk');
    assert.deepEqual(keyIds(await rawPayloads(inner, 'r1')), new Set(['k2']));

    const only2 = new EncryptingCheckpointStore(inner, { activeKeyId: 'k2', keys: { k2 } });
    assert.deepEqual(await only2.loadRun('r1'), before, 'same plaintext, same digests, same everything else');
    assert.deepEqual(await only2.listOperations('r1'), beforeOps);
    assert.deepEqual(await only2.reencryptRun('r1'), { runId: 'r1', rewritten: 0, alreadyCurrent: 15, skipped: 0 }, 'a second pass finds nothing to do');
  });

  it('seals clear text written before encryption was enabled, bound to its record like any other', async () => {
    const inner = new MemoryCheckpointStore();
    await writeRun(inner, null, 'plain', 2);
    const store = new EncryptingCheckpointStore(inner, ROTATED);
    const report = await store.reencryptRun('plain');
    assert.deepEqual(report, { runId: 'plain', rewritten: 7, alreadyCurrent: 0, skipped: 0 });
    const raw = await rawPayloads(inner, 'plain');
    assert.deepEqual(keyIds(raw), new Set(['k2']));
    assert.equal((await store.loadRun('plain'))?.steps[0]?.output, '{"n":1}');
    // Bound to its record: the input's envelope does not open as the error.
    const loaded = (await inner.loadRun('plain'))!;
    await inner.rewritePayloads('plain', { error: { from: loaded.run.error!, to: loaded.run.input } });
    await assert.rejects(store.getRun('plain'), (e: WaypointError) => e.code === 'CHECKPOINT_CORRUPTED');
  });

  it('leaves a value changed meanwhile to its writer and counts it as skipped', async () => {
    const inner = new WatchedStore();
    await writeRun(inner, OLD, 'r1', 2);
    const rotated = new EncryptingCheckpointStore(inner, ROTATED);
    // A worker resumes the failed run between the read and the rewrite and clears its error.
    inner.beforeRewrite = () => inner.updateRun('r1', { status: 'running', error: null }, null);
    assert.deepEqual(await rotated.reencryptRun('r1'), { runId: 'r1', rewritten: 6, alreadyCurrent: 0, skipped: 1 });
    assert.equal((await inner.getRun('r1'))?.error, null, 'the newer value stands');
  });

  it('never rewrites a value it cannot open: the rest of the run is done, then CHECKPOINT_CORRUPTED names it', async () => {
    const inner = new MemoryCheckpointStore();
    await writeRun(inner, OLD, 'r1', 3);
    const k0 = { activeKeyId: 'k0', keys: { k0: randomBytes(32) } };
    const sealedElsewhere = new PayloadCipher(k0).sealText('{"n":2}', 'r1:2:output');
    const step2 = (await inner.listSteps('r1', { fromSequence: 2, toSequence: 2 }))[0];
    await inner.rewritePayloads('r1', { steps: [{ sequence: 2, output: { from: step2.output, to: sealedElsewhere } }] });

    const rotated = new EncryptingCheckpointStore(inner, ROTATED);
    await assert.rejects(rotated.reencryptRun('r1'), (e: unknown) => {
      assert.ok(e instanceof CheckpointCorruptedError);
      assert.equal(e.runId, 'r1');
      assert.equal(e.sequence, 2);
      assert.match(e.message, /the output cannot be re-encrypted: it is encrypted with key id 'k0', which is not configured/);
      return true;
    });
    const raw = (await inner.loadRun('r1'))!;
    assert.equal(raw.steps[1].output, sealedElsewhere, 'left exactly as it was');
    assert.deepEqual(keyIds((await rawPayloads(inner, 'r1')).filter((v) => v !== sealedElsewhere)), new Set(['k2']), 'everything else was re-encrypted');
  });

  it('a tampered ciphertext is unreadable too; an unknown run is RUN_NOT_FOUND', async () => {
    const inner = new MemoryCheckpointStore();
    await writeRun(inner, OLD, 'r1', 1);
    const input = (await inner.getRun('r1'))!.input;
    const at = input.lastIndexOf(':') + 2; // inside the ciphertext
    const flipped = input.slice(0, at) + (input[at] === 'A' ? 'B' : 'A') + input.slice(at + 1);
    await inner.rewritePayloads('r1', { input: { from: input, to: flipped } });
    const rotated = new EncryptingCheckpointStore(inner, ROTATED);
    await assert.rejects(
      rotated.reencryptRun('r1'),
      (e: CheckpointCorruptedError) =>
        e.code === 'CHECKPOINT_CORRUPTED' && e.sequence === 0 && /the run input cannot be re-encrypted: decryption with key id 'k1' failed/.test(e.message),
    );
    assert.equal((await inner.getRun('r1'))?.input, flipped);
    await assert.rejects(rotated.reencryptRun('nope'), (e: WaypointError) => e.code === 'RUN_NOT_FOUND');
    await assert.rejects(rotated.reencryptRun('r1', { chunkSize: 0 }), (e: WaypointError) => e.code === 'INVALID_OPTIONS');
  });
});

describe('reencryptAll', () => {
  it('goes through every run, reports each, and lists the unreadable ones without stopping', async () => {
    const inner = new MemoryCheckpointStore();
    await writeRun(inner, OLD, 'a', 2);
    await writeRun(inner, { activeKeyId: 'k0', keys: { k0: randomBytes(32) } }, 'lost', 1);
    await writeRun(inner, OLD, 'c', 1);
    const seen: string[] = [];
    const rotated = new EncryptingCheckpointStore(inner, ROTATED);
    const { runs, unreadable } = await rotated.reencryptAll({
      onRun: (runId, outcome) => seen.push(`${runId}:${outcome instanceof CheckpointCorruptedError ? 'unreadable' : outcome.rewritten}`),
    });
    assert.deepEqual(runs.map((r) => [r.runId, r.rewritten]).sort(), [
      ['a', 7],
      ['c', 6],
    ]);
    assert.deepEqual(
      unreadable.map((e) => [e.runId, e.sequence]),
      [['lost', 0]],
    );
    assert.deepEqual([...seen].sort(), ['a:7', 'c:6', 'lost:unreadable']);
    assert.equal(rotated.activeKeyId, 'k2');
    const filtered = await rotated.reencryptAll({ filter: { status: 'running' } });
    assert.deepEqual(filtered, { runs: [], unreadable: [] });
  });
});
