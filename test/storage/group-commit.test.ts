import 'reflect-metadata';
import { strict as assert } from 'node:assert';
import { after, describe, it } from 'node:test';
import { LeaseLostError } from '../../src/contract/errors';
import type { StepAppend } from '../../src/contract/checkpoint-store';
import { CommitBatcher, type BatchResults, resolveGroupCommit } from '../../src/storage/sql/group-commit';
import { TypeOrmCheckpointStore } from '../../src/storage/sql/typeorm-store';
import { PG_TEST_URL, dropSchema, schemaFor } from '../helpers/pg-schema';
import { appendSteps, cursorAt, leasedRun, stepRecord, withCode } from '../helpers/store-records';

/** A writer whose batches the test releases by hand, recording what each batch carried. */
class HeldWriter {
  readonly batches: string[][] = [];
  private readonly releases: Array<(results: BatchResults | Error) => void> = [];

  write = (batch: string[]): Promise<BatchResults> => {
    this.batches.push([...batch]);
    return new Promise((resolve, reject) => this.releases.push((r) => (r instanceof Error ? reject(r) : resolve(r))));
  };

  /** Ends the oldest open batch: every item committed, or per-item errors, or the whole write failing. */
  release(results?: BatchResults | Error): void {
    const next = this.releases.shift();
    assert.ok(next, 'a batch is open');
    next(results ?? this.batches[this.batches.length - this.releases.length - 1].map(() => null));
  }
}

const tick = () => new Promise((resolve) => setImmediate(resolve));

describe('group commit: batching rules (CommitBatcher)', () => {
  it('sends at once below maxInFlight, queues above it, and sends the queue as one batch when a slot frees', async () => {
    const writer = new HeldWriter();
    const batcher = new CommitBatcher<string>((s) => s.split(':')[0], writer.write, { maxInFlight: 2, maxBatch: 64 });
    const done: string[] = [];
    const submit = (item: string) => batcher.submit(item).then(() => done.push(item));
    const all = ['a:1', 'b:1', 'c:1', 'd:1', 'e:1'].map(submit);
    assert.deepEqual(writer.batches, [['a:1'], ['b:1']], 'two lone appends in flight, no waiting for company');
    assert.equal(batcher.stats.queued, 3);
    writer.release();
    await tick();
    assert.deepEqual(done, ['a:1'], 'acknowledged only once its own batch returned');
    assert.deepEqual(writer.batches[2], ['c:1', 'd:1', 'e:1'], 'everything queued meanwhile leaves together');
    writer.release();
    writer.release();
    await Promise.all(all);
    assert.deepEqual(batcher.stats, { statements: 3, appends: 5, queued: 0 });
  });

  it('never puts two items of one key in a batch, keeps each key in order, and caps a batch at maxBatch', async () => {
    const writer = new HeldWriter();
    const batcher = new CommitBatcher<string>((s) => s.split(':')[0], writer.write, { maxInFlight: 1, maxBatch: 3 });
    const all = ['x:0', 'a:1', 'a:2', 'b:1', 'c:1', 'd:1', 'a:3'].map((item) => batcher.submit(item));
    writer.release();
    await tick();
    assert.deepEqual(writer.batches[1], ['a:1', 'b:1', 'c:1']);
    writer.release();
    await tick();
    assert.deepEqual(writer.batches[2], ['a:2', 'd:1']);
    writer.release();
    await tick();
    assert.deepEqual(writer.batches[3], ['a:3']);
    writer.release();
    await Promise.all(all);
  });

  it('gives each item its own error, and every item the error of a failed write', async () => {
    const writer = new HeldWriter();
    const batcher = new CommitBatcher<string>((s) => s, writer.write, { maxInFlight: 1, maxBatch: 64 });
    const first = batcher.submit('first');
    const [ok, stale] = [batcher.submit('ok'), batcher.submit('stale')];
    writer.release();
    await first;
    const lost = new Error('fenced out');
    writer.release([null, lost]);
    await ok;
    await assert.rejects(stale, (e) => e === lost);
    const [h, p, q] = [batcher.submit('h'), batcher.submit('p'), batcher.submit('q')];
    writer.release();
    await h;
    const down = new Error('connection terminated');
    writer.release(down);
    await assert.rejects(p, (e) => e === down);
    await assert.rejects(q, (e) => e === down);
  });

  it('rejects settings that are not positive integers; false turns it off', () => {
    assert.equal(resolveGroupCommit(false), null);
    assert.deepEqual(resolveGroupCommit(undefined), { maxInFlight: 2, maxBatch: 64 });
    assert.throws(() => resolveGroupCommit({ maxInFlight: 0 }), withCode('INVALID_STORE_OPTIONS'));
    assert.throws(() => resolveGroupCommit({ maxBatch: 1.5 }), /groupCommit\.maxBatch must be a positive integer/);
  });
});

describe('group commit on PostgreSQL', { timeout: 60_000 }, () => {
  const opened: { store: TypeOrmCheckpointStore; schema: string }[] = [];
  after(async () => {
    for (const { store, schema } of opened.splice(0)) {
      await store.close();
      await dropSchema(schema);
    }
  });

  async function fresh(testName: string, maxInFlight: number): Promise<TypeOrmCheckpointStore> {
    const schema = schemaFor(`group commit: ${testName}`);
    await dropSchema(schema);
    const store = new TypeOrmCheckpointStore({ type: 'postgres', url: PG_TEST_URL, schema, poolSize: 4, groupCommit: { maxInFlight } });
    opened.push({ store, schema });
    await store.init();
    return store;
  }

  /** One append per run, all submitted at once behind a lone append that holds the only batch slot. */
  async function appendTogether(store: TypeOrmCheckpointStore, appends: StepAppend[]): Promise<PromiseSettledResult<void>[]> {
    const holder = 'holder';
    const epoch = await leasedRun(store, holder);
    const before = store.groupCommitStats!;
    const settled = Promise.allSettled([store.appendStep({ step: stepRecord(holder, 1), run: cursorAt(1), fence: { epoch } }), ...appends.map((a) => store.appendStep(a))]);
    const results = (await settled).slice(1);
    const after = store.groupCommitStats!;
    assert.equal(after.statements - before.statements, 2, 'the lone append, then one statement for all the others');
    assert.equal(after.appends - before.appends, appends.length + 1);
    return results;
  }

  it('twenty runs ready together commit in one statement, each row and cursor exactly as a lone append writes it', async () => {
    const store = await fresh('twenty', 1);
    const runs = Array.from({ length: 20 }, (_, i) => `run-${i}`);
    const epochs = await Promise.all(runs.map((runId) => leasedRun(store, runId)));
    for (const [i, runId] of runs.entries()) await appendSteps(store, runId, epochs[i], 2);
    // run-1 is stored paused: the batch's steady statement leaves it out and it goes alone, with its transition.
    await store.updateRun('run-1', { status: 'paused', resumeHint: 'paused by SIGTERM at step 3' }, { epoch: epochs[1] });
    const appends = runs.map((runId, i): StepAppend => ({
      step: stepRecord(runId, 3, { output: JSON.stringify({ n: 3, text: `it's "quoted" \\ {braces}, ${'é'.repeat(i)}` }), memory: i % 2 ? null : '{"m":1}' }),
      run: cursorAt(3, i === 0 ? { status: 'completed', resumeHint: 'Pipeline completed; nothing to resume.' } : {}),
      fence: { epoch: epochs[i] },
    }));
    const results = await appendTogether(store, appends);
    assert.deepEqual(
      results.map((r) => r.status),
      runs.map(() => 'fulfilled'),
    );
    for (const [i, runId] of runs.entries()) {
      const loaded = (await store.loadRun(runId))!;
      assert.equal(loaded.run.lastSequence, 3);
      assert.equal(loaded.run.cursorStep, 3);
      assert.equal(loaded.run.status, i === 0 ? 'completed' : 'running');
      assert.equal(loaded.run.resumeHint, i === 0 ? 'Pipeline completed; nothing to resume.' : null);
      assert.deepEqual(loaded.steps[2], appends[i].step, `run ${runId}: the batched row reads back unchanged`);
    }
  });

  it('a stale fence or a wrong sequence in a batch is rejected with LeaseLostError; the others commit', async () => {
    const store = await fresh('stale in batch', 1);
    const [a, b, c] = ['a', 'b', 'c'];
    const [ea, eb, ec] = [await leasedRun(store, a), await leasedRun(store, b), await leasedRun(store, c)];
    const taken = await store.acquireLease(b, 'worker-b', 60_000, 'worker-a');
    assert.ok(taken && taken.epoch > eb);
    const results = await appendTogether(store, [
      { step: stepRecord(a, 1), run: cursorAt(1), fence: { epoch: ea } },
      { step: stepRecord(b, 1), run: cursorAt(1), fence: { epoch: eb } },
      { step: stepRecord(c, 2), run: cursorAt(2), fence: { epoch: ec } },
    ]);
    assert.equal(results[0].status, 'fulfilled');
    for (const r of [results[1], results[2]]) {
      assert.equal(r.status, 'rejected');
      assert.ok(r.reason instanceof LeaseLostError);
    }
    assert.equal((await store.getRun(a))!.lastSequence, 1);
    assert.equal((await store.getRun(b))!.lastSequence, 0);
    assert.deepEqual(await store.listSteps(c), []);
  });

  it('when PostgreSQL rejects the batch statement, each append is retried alone: only the bad one fails', async () => {
    const store = await fresh('bad row in batch', 1);
    const [good, bad] = ['good', 'bad'];
    const [eg, eb] = [await leasedRun(store, good), await leasedRun(store, bad)];
    // A NUL character is not valid in PostgreSQL text: the whole statement fails, nothing of it commits.
    const results = await appendTogether(store, [
      { step: stepRecord(good, 1), run: cursorAt(1), fence: { epoch: eg } },
      { step: stepRecord(bad, 1, { output: '{"nul":"\u0000"}' }), run: cursorAt(1), fence: { epoch: eb } },
    ]);
    assert.equal(results[0].status, 'fulfilled');
    assert.equal(results[1].status, 'rejected');
    assert.match(String(results[1].reason), /0x00|invalid byte sequence/);
    assert.equal((await store.listSteps(good)).length, 1);
    assert.equal((await store.getRun(bad))!.lastSequence, 0, 'the bad append left nothing behind');
  });

  it('groupCommit: false sends every append alone and reports no stats', async () => {
    const schema = schemaFor('group commit: off');
    await dropSchema(schema);
    const store = new TypeOrmCheckpointStore({ type: 'postgres', url: PG_TEST_URL, schema, groupCommit: false });
    opened.push({ store, schema });
    await store.init();
    const epoch = await leasedRun(store, 'solo');
    await appendSteps(store, 'solo', epoch, 3);
    assert.equal(store.groupCommitStats, null);
    assert.equal((await store.getRun('solo'))!.lastSequence, 3);
  });
});
