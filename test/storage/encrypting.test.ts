import { strict as assert } from 'node:assert';
import { describe, it } from 'node:test';
import { ContainerModule } from 'inversify';
import { TOKENS, Waypoint } from '../../src/index';
import type { CheckpointStore } from '../../src/contract/checkpoint-store';
import { EncryptingCheckpointStore } from '../../src/storage/encrypting-store';
import { MemoryCheckpointStore } from '../../src/storage/memory-store';
import { ENVELOPE_PREFIX } from '../../src/storage/payload-cipher';
import { TypeOrmCheckpointStore } from '../../src/storage/sql/typeorm-store';
import { runStoreConformance } from '../../src/testing';
import { tempSqlitePath } from '../helpers/sqlite-temp';
import { cursorAt, newRun, stepRecord } from '../helpers/store-records';

// Encryption is a codec on the payload path (CodecCheckpointStore); the encrypted store honours the whole
// contract in plaintext terms, over the reference store and over a SQL store (transactions, batched appends).
const KEYS = { activeKeyId: 'k1', keys: { k1: Buffer.alloc(32, 7) } };

runStoreConformance({
  name: 'encrypting over memory',
  makeStore: () => {
    const inner = new MemoryCheckpointStore();
    const store = new EncryptingCheckpointStore(inner, KEYS);
    return Promise.resolve({ store, inner, cleanup: () => store.close() });
  },
  processLocal: true,
});

runStoreConformance({
  name: 'encrypting over sqlite',
  makeStore: () => {
    const { file, remove } = tempSqlitePath();
    const stores: EncryptingCheckpointStore[] = [];
    const open = () => (stores.push(new EncryptingCheckpointStore(new TypeOrmCheckpointStore({ type: 'sqlite', path: file }), KEYS)), stores.at(-1)!);
    const store = open();
    return Promise.resolve({ store, inner: store.inner, sibling: open, cleanup: async () => (await Promise.all(stores.map((s) => s.close())), remove()) });
  },
});

/** What the release before the codec (commit 4bbf52f) stored for a run written through EncryptingCheckpointStore with KEYS. */
const SEALED_BY_PREVIOUS_RELEASE = {
  input: 'wpenc:1:k1:oN3ctLIgwDGsRBZw:a5oB3XFlbY6P6p084hsoQw==:yHRnBGJNKy8nhmjC8eu7AxY=',
  error: 'wpenc:1:k1:/78EEiySEFxxhOZF:mBlxkXRtAM+AfWabvIc/Xg==:HRxNKEGRMrQCX92FtLADY6IN',
  output: 'wpenc:1:k1:To9KkEM3SWV7Ry8M:+Osh95bzbYSegS4GQWlvaQ==:DvdrSHnfWg==',
  memory: 'wpenc:1:k1:p7ohn6NqjTyubkBw:8lWoUTTm03b5iPcMaHlVlw==:x2TCveqXReop/A==',
  result: 'wpenc:1:k1:lhnFle+fjEZvyEpU:6i96zlZc8S8tazwXafUSnA==:P01cjRnqQYs=',
  opError: 'wpenc:1:k1:zwtoi8aTasAPL6p5:1rMnbUGbIyq+MmKsNDH5MQ==:7WmHNg3tEV/AwHV6Z1y8jas=',
};

/** Puts stored values straight into the inner store, as an earlier release left them. */
async function storedRun(inner: CheckpointStore, values: typeof SEALED_BY_PREVIOUS_RELEASE): Promise<void> {
  await inner.createRun(newRun('golden', { input: values.input }));
  const { epoch } = (await inner.acquireLease('golden', 'w', 60_000))!;
  await inner.appendStep({ step: stepRecord('golden', 1, { output: values.output, memory: values.memory }), run: cursorAt(1), fence: { epoch } });
  await inner.putOperation({ operationKey: 'golden/send', runId: 'golden', stepKey: 'a/s', name: 'send', state: 'committed', result: values.result, error: null });
  await inner.putOperation({ operationKey: 'golden/signal', runId: 'golden', stepKey: 'a/s', name: 'signal', state: 'failed', result: null, error: values.opError });
  await inner.updateRun('golden', { status: 'failed', error: values.error }, { epoch });
}

describe('encrypting store: the stored format', () => {
  it('opens what the previous release sealed, field by field', async () => {
    const inner = new MemoryCheckpointStore();
    await storedRun(inner, SEALED_BY_PREVIOUS_RELEASE);
    const store = new EncryptingCheckpointStore(inner, KEYS);
    const loaded = (await store.loadRun('golden'))!;
    assert.deepEqual([loaded.run.input, loaded.run.error], ['{"ticker":"AAPL"}', '{"message":"boom"}']);
    assert.deepEqual([loaded.steps[0].output, loaded.steps[0].memory], ['{"n":1}', '{"seen":1}']);
    assert.equal((await store.getOperation('golden/send'))?.result, '{"id":1}');
    assert.equal((await store.getOperation('golden/signal'))?.error, '{"message":"503"}');
  });

  it('a sealed value moved to another field does not open (CHECKPOINT_CORRUPTED)', async () => {
    const inner = new MemoryCheckpointStore();
    await storedRun(inner, { ...SEALED_BY_PREVIOUS_RELEASE, memory: SEALED_BY_PREVIOUS_RELEASE.output });
    const store = new EncryptingCheckpointStore(inner, KEYS);
    await assert.rejects(store.loadRun('golden'), (err: { code?: string }) => err.code === 'CHECKPOINT_CORRUPTED');
  });

  it('writes every payload sealed, and only payloads', async () => {
    const inner = new MemoryCheckpointStore();
    const store = new EncryptingCheckpointStore(inner, KEYS);
    await storedRun(store, { input: '{"ticker":"AAPL"}', error: '{"m":1}', output: '{"n":1}', memory: '{"s":1}', result: '{"id":1}', opError: '{"e":1}' });
    const raw = (await inner.loadRun('golden'))!;
    const ops = await inner.listOperations('golden');
    const payloads = [raw.run.input, raw.run.error, raw.steps[0].output, raw.steps[0].memory, ...ops.flatMap((o) => [o.result, o.error])].filter((v) => v !== null);
    assert.equal(payloads.length, 6);
    for (const value of payloads) assert.ok(value.startsWith(ENVELOPE_PREFIX), `sealed: ${value}`);
    assert.deepEqual([raw.run.metadata, raw.steps[0].sha256, raw.steps[0].checkpointId], ['{"host":"test"}', 'ab'.repeat(32), 'golden-cp-1'], 'identifiers and digests stay clear');
  });
});

describe('a Waypoint without the key beside encrypted runs', () => {
  it('lists and gets a run whose stored error it cannot open, saying why, instead of failing the whole list', async () => {
    const inner = new MemoryCheckpointStore();
    await storedRun(inner, SEALED_BY_PREVIOUS_RELEASE);
    await inner.createRun(newRun('plain'));
    const waypoint = await Waypoint.create({ modules: [new ContainerModule(({ bind }) => void bind(TOKENS.CheckpointStore).toConstantValue(inner))] });
    try {
      const listed = await waypoint.list();
      assert.deepEqual(listed.map((r) => r.runId).sort(), ['golden', 'plain']);
      const golden = listed.find((r) => r.runId === 'golden')!;
      assert.equal(golden.status, 'failed');
      const error = golden.error as { name: string; code: string; message: string };
      assert.equal(error.code, 'UNSERIALIZABLE_VALUE');
      assert.equal(error.name, 'UnreadableStoredError');
      assert.equal(
        error.message,
        "The error stored for run 'golden' is encrypted (key id 'k1') and this Waypoint has no encryption key: open the store with the `encryption` option it was written with to read it.",
      );
      assert.deepEqual((await waypoint.get('golden'))?.error, golden.error);
      assert.equal(listed.find((r) => r.runId === 'plain')!.error, null);
    } finally {
      await waypoint.close();
    }
  });

  it('an altered stored error is reported the same way, with the reason and what to run', async () => {
    const inner = new MemoryCheckpointStore();
    await storedRun(inner, { ...SEALED_BY_PREVIOUS_RELEASE, error: '{"name":' });
    const waypoint = await Waypoint.create({ modules: [new ContainerModule(({ bind }) => void bind(TOKENS.CheckpointStore).toConstantValue(inner))] });
    try {
      const error = (await waypoint.get('golden'))?.error as { name: string; code: string; message: string };
      assert.equal(error.code, 'UNSERIALIZABLE_VALUE');
      assert.match(
        error.message,
        /^The error stored for run 'golden' cannot be read: it is not valid JSON \(.+\)\. Run waypoint\.verify\('golden'\) to see whether the run's rows were altered\.$/,
      );
    } finally {
      await waypoint.close();
    }
  });
});
