import { strict as assert } from 'node:assert';
import { createHash, randomUUID } from 'node:crypto';
import { createServer, Socket, type Server } from 'node:net';
import { after, afterEach, describe, it } from 'node:test';
import { Container } from 'inversify';
import { Redis } from 'ioredis';
import { TOKENS } from '../../src/contract/tokens';
import type { CheckpointStore } from '../../src/contract/checkpoint-store';
import { redisStorage } from '../../src/storage/redis/module';
import { RedisCheckpointStore, type RedisStoreOptions } from '../../src/storage/redis/redis-store';
import { cursorAt, legacyRedisStepEntry, newRun, sleep, stepRecord, withCode } from '../helpers/store-records';
import { runStoreConformance } from '../../src/testing';

// Against the shared Redis at 127.0.0.1:6379: every store gets its own key prefix (other test runs use
// the same server, hence a random part) and every key under it is deleted afterwards. Never FLUSHDB.
const URL = process.env.WAYPOINT_TEST_REDIS_URL ?? 'redis://127.0.0.1:6379';
const admin = new Redis(URL);
after(() => admin.disconnect());

runStoreConformance({
  name: 'redis',
  makeStore: (testName) => {
    const prefix = `wp-test:${createHash('sha256').update(testName).digest('hex').slice(0, 10)}-${randomUUID().slice(0, 8)}:`;
    const stores: CheckpointStore[] = [];
    const open = () => (stores.push(new RedisCheckpointStore({ url: URL, keyPrefix: prefix })), stores.at(-1)!);
    return Promise.resolve({ store: open(), sibling: open, cleanup: async () => (await Promise.all(stores.map((s) => s.close())), await deleteUnder(prefix)) });
  },
});

// Below: what the contract suite cannot see (key layout, expiry, outages, server clock, no KEYS/SCAN).

const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

async function keysUnder(prefix: string): Promise<string[]> {
  const found: string[] = [];
  for await (const batch of admin.scanStream({ match: `${prefix}*`, count: 500 })) found.push(...(batch as string[]));
  return found;
}

async function deleteUnder(prefix: string): Promise<void> {
  const keys = await keysUnder(prefix);
  if (keys.length > 0) await admin.del(...keys);
}

async function freshStore(options: RedisStoreOptions = {}): Promise<{ store: RedisCheckpointStore; prefix: string }> {
  const prefix = `wp-test:${randomUUID()}:`;
  const store = new RedisCheckpointStore({ url: URL, keyPrefix: prefix, ...options });
  await store.init();
  cleanups.push(async () => (await store.close(), await deleteUnder(prefix)));
  return { store, prefix };
}

async function leasedRun(store: RedisCheckpointStore, runId = 'r1', owner = 'w1') {
  await store.createRun(newRun(runId, { pipelineName: 'p' }));
  return (await store.acquireLease(runId, owner, 30_000))!;
}

describe('RedisCheckpointStore: records', () => {
  it('strings UTF-8 cannot carry (lone surrogates) round-trip exactly; steps past 9 load in numeric order', async () => {
    const { store } = await freshStore();
    await store.createRun(newRun('r1', { metadata: 'lone \uD800 surrogate' }));
    assert.equal((await store.getRun('r1'))!.metadata, 'lone \uD800 surrogate');
    const fence = (await store.acquireLease('r1', 'w1', 30_000))!;
    const steps = Array.from({ length: 12 }, (_, i) => stepRecord('r1', i + 1, { memory: i === 0 ? '{"m":"\uDC00"}' : null }));
    for (const s of steps) await store.appendStep({ step: s, run: cursorAt(s.sequence), fence });
    await store.updateRun('r1', { error: 'bad \uDBFF', resumeHint: '\u0000wp-json:"not an escape"' }, fence);
    const loaded = (await store.loadRun('r1'))!;
    assert.deepStrictEqual(loaded.steps, steps);
    assert.deepEqual([loaded.run.error, loaded.run.resumeHint], ['bad \uDBFF', '\u0000wp-json:"not an escape"']);
    assert.deepStrictEqual(await store.listSteps('r1', { fromSequence: 9, toSequence: 11 }), steps.slice(8, 11));
  });

  it('rewritePayloads swaps strings UTF-8 cannot carry, exactly, in the run hash, step entries and operations', async () => {
    const { store } = await freshStore();
    await store.createRun(newRun('r1', { input: 'in \uD800' }));
    const fence = (await store.acquireLease('r1', 'w1', 30_000))!;
    const step = stepRecord('r1', 1, { output: 'out \uDC00 "q"', memory: '{"m":"\uDBFF"}' });
    await store.appendStep({ step, run: cursorAt(1), fence });
    await store.beginOperation({ operationKey: 'op-1', runId: 'r1', stepKey: 'research/step1', name: 'send' }, fence);
    await store.finishOperation('op-1', { state: 'committed', result: 'res \uD800' }, { runId: 'r1', epoch: fence.epoch });
    const outcome = await store.rewritePayloads('r1', {
      input: { from: 'in \uD800', to: 'new \uDC00' },
      steps: [{ sequence: 1, output: { from: step.output, to: 'o2 \uD800' }, memory: { from: step.memory!, to: '\u0000wp-json:m2' } }],
      operations: [{ operationKey: 'op-1', result: { from: 'res \uD800', to: 'r2 \uDFFF' } }],
    });
    assert.deepEqual(outcome, { rewritten: 4, skipped: 0 });
    const loaded = (await store.loadRun('r1'))!;
    assert.equal(loaded.run.input, 'new \uDC00');
    assert.deepStrictEqual(loaded.steps, [{ ...step, output: 'o2 \uD800', memory: '\u0000wp-json:m2' }]);
    assert.equal((await store.getOperation('op-1'))?.result, 'r2 \uDFFF');
  });

  it('step entries of the first format (long keys) still load, sit beside short-key entries, and are rewritten in place', async () => {
    const { store, prefix } = await freshStore();
    const fence = await leasedRun(store);
    const steps = [
      stepRecord('r1', 1, { output: 'out "1" \uD800', memory: '{"m":1}' }),
      stepRecord('r1', 2, { output: '{"o":"x","m":"y"}', memory: null, path: 'p/2' }),
      stepRecord('r1', 3),
    ];
    for (const step of steps) await store.appendStep({ step, run: cursorAt(step.sequence), fence });
    const key = `${prefix}run:{r1}:steps`;
    const short = await admin.hget(key, '3');
    assert.match(short!, /^\{"q":3,"c":/);
    // What a release before the short keys wrote for steps 1 and 2 (long key names, same values).
    await admin.hset(key, '1', legacyRedisStepEntry(steps[0]), '2', legacyRedisStepEntry(steps[1]));
    assert.ok((await admin.hstrlen(key, '1')) > (await admin.hstrlen(key, '3')) + 100, 'the long keys cost over 100 bytes per entry');
    assert.deepStrictEqual((await store.loadRun('r1'))!.steps, steps);

    const outcome = await store.rewritePayloads('r1', {
      steps: [
        { sequence: 1, output: { from: steps[0].output, to: 'o1 \uDC00' }, memory: { from: steps[0].memory!, to: 'm1' } },
        { sequence: 3, output: { from: steps[2].output, to: 'o3' } },
        { sequence: 2, output: { from: 'not what is stored', to: 'never' } },
      ],
    });
    assert.deepEqual(outcome, { rewritten: 3, skipped: 1 });
    const loaded = (await store.loadRun('r1'))!.steps;
    assert.deepStrictEqual(loaded, [{ ...steps[0], output: 'o1 \uDC00', memory: 'm1' }, steps[1], { ...steps[2], output: 'o3' }]);
    assert.match((await admin.hget(key, '1'))!, /^\{"sequence":1,/, 'a legacy entry keeps its format');
    assert.match((await admin.hget(key, '3'))!, /^\{"q":3,/);
  });

  it('deleteRun removes every key of the run and its index entries', async () => {
    const { store, prefix } = await freshStore();
    const fence = await leasedRun(store);
    await store.appendStep({ step: stepRecord('r1', 1), run: cursorAt(1), fence });
    await store.beginOperation({ operationKey: 'k', runId: 'r1', stepKey: 'a/s1', name: 'send' }, fence);
    await store.deleteRun('r1');
    assert.deepEqual(await keysUnder(prefix), []);
    assert.equal(await store.getOperation('k'), null);
  });

  it('a child run leaves no key behind when deleted: its parent index entry goes with it', async () => {
    const { store, prefix } = await freshStore();
    await store.createRun(newRun('child', { parentRunId: 'parent' }));
    assert.deepEqual(
      (await keysUnder(prefix)).filter((k) => k.includes('idx:parent:')),
      [`${prefix}idx:parent:parent`],
    );
    await store.deleteRun('child');
    assert.deepEqual(await keysUnder(prefix), []);
  });
});

describe('RedisCheckpointStore: control-flow fields on data written before them', () => {
  it('a straight-line step entry has no path field; a path adds only its own field, last', async () => {
    const { store, prefix } = await freshStore();
    const fence = await leasedRun(store);
    const p = stepRecord('r1', 1, { path: null });
    await store.appendStep({ step: p, run: cursorAt(1), fence });
    // The short-key encoding: these keys in this order (the rewrite script relies on o, m, k following one another).
    const expected = JSON.stringify({
      q: p.sequence,
      c: p.checkpointId,
      ai: p.agentIndex,
      a: p.agentId,
      si: p.stepIndex,
      n: p.stepName,
      s: p.status,
      o: p.output,
      m: p.memory,
      k: p.idempotencyKey,
      e: p.sideEffectsCommitted,
      t0: p.startedAt.getTime(),
      t1: p.completedAt.getTime(),
      at: p.attempt,
      h: p.sha256,
    });
    assert.equal(await admin.hget(`${prefix}run:{r1}:steps`, '1'), expected);
    await store.appendStep({ step: stepRecord('r1', 2, { path: 'parallel[1]/Docs/search' }), run: cursorAt(2), fence });
    const withPath = (await admin.hget(`${prefix}run:{r1}:steps`, '2'))!;
    assert.ok(withPath.endsWith(`"h":"${p.sha256}","p":"parallel[1]/Docs/search"}`), withPath);
    assert.equal((await admin.hgetall(`${prefix}run:{r1}`)).parent_run_id, undefined, 'a top-level run hash has no parent field');
  });

  it('a run and steps written by the previous release load with path and parentRunId null, and take new steps', async () => {
    const { store, prefix } = await freshStore();
    // The previous release's layout, written directly: a run hash without parent_run_id, entries without path.
    const steps = [1, 2].map((sequence) => stepRecord('old', sequence));
    await admin.hset(`${prefix}run:{old}`, {
      run_id: 'old',
      pipeline_name: 'p',
      pipeline_version: '1',
      status: 'paused',
      cursor_agent: '0',
      cursor_step: '2',
      last_sequence: '2',
      input: '{}',
      metadata: '{}',
      lease_epoch: '3',
      created_at: '1700000000123',
      updated_at: '1700000000123',
    });
    await admin.zadd(`${prefix}idx:runs`, 1700000000123, 'old');
    await admin.zadd(`${prefix}idx:status:paused`, 1700000000123, 'old');
    await admin.zadd(`${prefix}idx:pipeline:p`, 1700000000123, 'old');
    for (const step of steps) await admin.hset(`${prefix}run:{old}:steps`, String(step.sequence), legacyRedisStepEntry(step));
    const loaded = (await store.loadRun('old'))!;
    assert.equal(loaded.run.parentRunId, null);
    assert.deepEqual(loaded.steps, steps);
    assert.deepEqual(
      (await store.listRuns()).map((r) => [r.runId, r.parentRunId]),
      [['old', null]],
    );
    const grant = (await store.acquireLease('old', 'w', 30_000))!;
    await store.appendStep({ step: stepRecord('old', 3, { path: 'forEach(items)[0]/A/s' }), run: cursorAt(3), fence: grant });
    assert.deepEqual(
      (await store.loadRun('old'))!.steps.map((s) => s.path),
      [null, null, 'forEach(items)[0]/A/s'],
    );
  });
});

describe('RedisCheckpointStore: leases and fencing', () => {
  it('expired lease is taken over with a new epoch; the old holder is fenced out and changes nothing', async () => {
    const { store } = await freshStore();
    await store.createRun(newRun('r1'));
    const old = (await store.acquireLease('r1', 'A', 150))!;
    assert.equal(old.epoch, 1);
    await store.appendStep({ step: stepRecord('r1', 1), run: cursorAt(1), fence: old });
    assert.equal(await store.acquireLease('r1', 'B', 10_000), null, 'held and unexpired');
    await sleep(250);
    const taken = (await store.acquireLease('r1', 'B', 10_000))!;
    assert.equal(taken.epoch, 2);

    const before = await store.loadRun('r1');
    await assert.rejects(store.appendStep({ step: stepRecord('r1', 2), run: cursorAt(2), fence: old }), withCode('LEASE_LOST'));
    await assert.rejects(store.updateRun('r1', { status: 'paused' }, old), withCode('LEASE_LOST'));
    await assert.rejects(store.beginOperation({ operationKey: 'k', runId: 'r1', stepKey: 'a/s', name: 'n' }, old), withCode('LEASE_LOST'));
    await assert.rejects(store.finishOperation('k', { state: 'committed', result: 'r' }, { ...old, runId: 'r1' }), withCode('LEASE_LOST'));
    assert.equal(await store.renewLease('r1', 'A', old.epoch, 10_000), false);
    await store.releaseLease('r1', 'A', old.epoch);
    assert.deepStrictEqual(await store.loadRun('r1'), before);
    assert.equal(await store.getOperation('k'), null);

    assert.equal(await store.renewLease('r1', 'B', taken.epoch, 20_000), true);
    const again = (await store.acquireLease('r1', 'B', 10_000))!;
    assert.equal(again.epoch, 3, 'the same owner re-acquires with a new epoch');
    await store.releaseLease('r1', 'B', again.epoch);
    const run = (await store.getRun('r1'))!;
    assert.deepEqual([run.leaseOwner, run.leaseExpiresAt, run.leaseEpoch], [null, null, 3]);
    assert.equal((await store.acquireLease('r1', 'C', 1_000))!.epoch, 4, 'epochs are never reused');
  });

  it('lease expiry comes from the Redis server clock', async () => {
    const { store } = await freshStore();
    await store.createRun(newRun('r1'));
    const [seconds, micros] = await admin.time();
    const grant = (await store.acquireLease('r1', 'A', 60_000))!;
    const serverNow = Number(seconds) * 1000 + Math.floor(Number(micros) / 1000);
    assert.ok(Math.abs(grant.expiresAt.getTime() - (serverNow + 60_000)) < 1_000);
  });
});

describe('RedisCheckpointStore: listing and retention', () => {
  it('listRuns filters by status, pipeline, since and limit from the indexes, never KEYS or SCAN', async () => {
    const { store, prefix } = await freshStore();
    const spy = new Redis(URL);
    const { store: spied } = await freshStore({ client: spy, keyPrefix: prefix });
    const commands: string[] = [];
    const send = spy.sendCommand.bind(spy);
    spy.sendCommand = (command: { name: string }, ...rest: unknown[]) => (commands.push(command.name), send(command as never, ...(rest as [])));
    cleanups.push(() => Promise.resolve(spy.disconnect()));

    const statuses = ['running', 'paused', 'failed', 'completed', 'paused'] as const;
    for (const [i, status] of statuses.entries()) {
      const runId = `run-${i}`;
      await store.createRun(newRun(runId, { pipelineName: i % 2 === 0 ? 'even' : 'odd' }));
      if (status !== 'running') await store.updateRun(runId, { status }, null);
      await sleep(3); // distinct updated_at, so the expected order is unambiguous
    }
    const ids = (runs: { runId: string }[]) => runs.map((r) => r.runId);
    assert.deepEqual(ids(await spied.listRuns()), ['run-4', 'run-3', 'run-2', 'run-1', 'run-0']);
    assert.deepEqual(ids(await spied.listRuns({ status: 'paused' })), ['run-4', 'run-1']);
    assert.deepEqual(ids(await spied.listRuns({ status: ['failed', 'running', 'completed'] })), ['run-3', 'run-2', 'run-0']);
    assert.deepEqual(ids(await spied.listRuns({ pipelineName: 'even' })), ['run-4', 'run-2', 'run-0']);
    assert.deepEqual(ids(await spied.listRuns({ pipelineName: 'even', status: ['paused', 'running'] })), ['run-4', 'run-0']);
    assert.deepEqual(ids(await spied.listRuns({ limit: 2 })), ['run-4', 'run-3']);
    assert.deepEqual(ids(await spied.listRuns({ status: ['paused', 'failed'], limit: 2 })), ['run-4', 'run-2']);
    const third = (await store.getRun('run-2'))!;
    assert.deepEqual(ids(await spied.listRuns({ since: third.updatedAt })), ['run-4', 'run-3', 'run-2']);
    assert.deepEqual(await spied.listRuns({ status: [] }), []);
    assert.deepEqual(await spied.listRuns({ pipelineName: 'none' }), []);
    assert.ok(commands.includes('zrange'));
    assert.deepEqual(
      commands.filter((c) => ['keys', 'scan'].includes(c.toLowerCase())),
      [],
    );
  });

  it('every append leaves the indexes equal to the run hash (score = updated_at, status), in the same millisecond as the last write or not', async () => {
    const { store, prefix } = await freshStore();
    const { epoch } = await leasedRun(store);
    const indexed = async (status: string) => {
      const [updatedAt, all, byStatus, byPipeline, running] = await Promise.all([
        admin.hget(`${prefix}run:{r1}`, 'updated_at'),
        admin.zscore(`${prefix}idx:runs`, 'r1'),
        admin.zscore(`${prefix}idx:status:${status}`, 'r1'),
        admin.zscore(`${prefix}idx:pipeline:p`, 'r1'),
        admin.zscore(`${prefix}idx:status:running`, 'r1'),
      ]);
      return { updatedAt, all, byStatus, byPipeline, runningEntry: status === 'running' ? 'self' : running };
    };
    let sameMs = 0;
    let previous: string | null = null;
    for (let sequence = 1; sequence <= 60; sequence++) {
      // Back-to-back appends (many share a millisecond), then a few apart (each a new one).
      if (sequence > 50) await sleep(2);
      await store.appendStep({ step: stepRecord('r1', sequence), run: cursorAt(sequence), fence: { epoch } });
      const now = await indexed('running');
      assert.deepEqual(now, { updatedAt: now.updatedAt, all: now.updatedAt, byStatus: now.updatedAt, byPipeline: now.updatedAt, runningEntry: 'self' }, `after step ${sequence}`);
      if (now.updatedAt === previous) sameMs += 1;
      previous = now.updatedAt;
    }
    // A status change in an append moves the run between status indexes even within the same millisecond.
    await store.appendStep({ step: stepRecord('r1', 61), run: cursorAt(61, { status: 'waiting' }), fence: { epoch } });
    const waiting = await indexed('waiting');
    assert.deepEqual(waiting, { updatedAt: waiting.updatedAt, all: waiting.updatedAt, byStatus: waiting.updatedAt, byPipeline: waiting.updatedAt, runningEntry: null });
    assert.deepEqual(
      (await store.listRuns({ status: 'waiting' })).map((r) => r.runId),
      ['r1'],
    );
    assert.deepEqual(await store.listRuns({ status: 'running' }), []);
    assert.ok(sameMs < 60, 'the appends spread over more than one millisecond');
  });

  it('listRuns pages and merges indexes correctly past one page, with many updated_at ties', async () => {
    const { store } = await freshStore();
    const statuses = ['running', 'paused', 'waiting', 'failed'] as const;
    const created = await Promise.all(
      Array.from({ length: 180 }, async (_, i) => {
        const runId = `run-${String(i).padStart(3, '0')}`;
        await store.createRun(newRun(runId, { pipelineName: `p${i % 3}` }));
        if (i % 4 !== 0) await store.updateRun(runId, { status: statuses[i % 4] }, null);
        return runId;
      }),
    );
    const all = (await Promise.all(created.map((id) => store.getRun(id)))).map((r) => r!);
    const since = [...all].sort((a, b) => a.updatedAt.getTime() - b.updatedAt.getTime())[60].updatedAt;
    const filters = [
      {},
      { limit: 7 },
      { status: 'paused' as const, limit: 60 },
      { status: ['waiting', 'failed'] as ('waiting' | 'failed')[], limit: 55 },
      { status: ['running', 'paused', 'failed'] as ('running' | 'paused' | 'failed')[] },
      { pipelineName: 'p1', status: 'failed' as const, limit: 5 },
      { since },
      { since, pipelineName: 'p2', limit: 30 },
      { pipelineName: 'p0', status: 'waiting' as const, limit: 2 },
      { status: ['running', 'paused', 'failed'] as ('running' | 'paused' | 'failed')[], limit: 3 },
    ];
    for (const filter of filters) {
      const wanted = new Set(filter.status === undefined ? statuses : ([] as string[]).concat(filter.status));
      const expected = all
        .filter((r) => wanted.has(r.status) && (!filter.pipelineName || r.pipelineName === filter.pipelineName) && (!filter.since || r.updatedAt >= filter.since))
        .sort((a, b) => b.updatedAt.getTime() - a.updatedAt.getTime() || a.runId.localeCompare(b.runId))
        .slice(0, filter.limit ?? Infinity);
      assert.deepEqual(await store.listRuns(filter), expected, JSON.stringify(filter));
    }
  });

  it('a finished run expires after finishedRunTtlSeconds and drops out of the listing; resuming it keeps it', async () => {
    const { store, prefix } = await freshStore({ finishedRunTtlSeconds: 1 });
    const fence = await leasedRun(store, 'done');
    await store.beginOperation({ operationKey: 'done/op', runId: 'done', stepKey: 'a/s1', name: 'send' }, fence);
    await store.appendEvents('done', [{ kind: 'part', step: 'a/s1', attempt: 1, data: '1' }], fence);
    await store.appendStep({ step: stepRecord('done', 1), run: cursorAt(1, { status: 'completed' }), fence });
    await store.appendEvents('done', [{ kind: 'status', status: 'completed' }]); // after the run's keys were set to expire
    const other = await leasedRun(store, 'resumed');
    await store.updateRun('resumed', { status: 'failed', error: 'x' }, other);
    await store.appendEvents('resumed', [{ kind: 'status', status: 'failed' }]);
    assert.ok((await admin.pttl(`${prefix}run:{resumed}:events`)) > 0, 'the events of a failed run expire with it');
    await store.updateRun('resumed', { status: 'running', error: null }, other);
    assert.equal(await admin.pttl(`${prefix}run:{resumed}:events`), -1, '... and no longer once it is resumed');
    await store.updateRun('resumed', { status: 'failed', error: 'x' }, other);
    assert.ok((await admin.pttl(`${prefix}run:{resumed}`)) > 0);
    await store.updateRun('resumed', { status: 'running', error: null }, other);
    for (const key of [`${prefix}run:{done}`, `${prefix}run:{done}:steps`, `${prefix}run:{done}:ops`, `${prefix}run:{done}:events`, `${prefix}op:done/op`]) {
      const ttl = await admin.pttl(key);
      assert.ok(ttl > 0 && ttl <= 1_000, `${key} expires (pttl ${ttl})`);
    }
    assert.equal(await admin.pttl(`${prefix}run:{resumed}`), -1, 'a run resumed after failing no longer expires');

    const deadline = Date.now() + 3_000;
    while ((await store.getRun('done')) !== null && Date.now() < deadline) await sleep(100);
    assert.equal(await store.getRun('done'), null);
    assert.equal(await store.getOperation('done/op'), null);
    assert.deepEqual(
      (await store.listRuns()).map((r) => r.runId),
      ['resumed'],
    );
    assert.equal(await admin.zscore(`${prefix}idx:runs`, 'done'), null, 'dropped from the index lazily');

    // The id is reused by another pipeline: no index entry of the expired run may resurface.
    await store.createRun(newRun('done', { pipelineName: 'q' }));
    assert.equal(await admin.zscore(`${prefix}idx:status:completed`, 'done'), null);
    assert.deepEqual(
      (await store.listRuns({ status: 'completed' })).map((r) => r.runId),
      [],
    );
    assert.deepEqual(
      (await store.listRuns({ pipelineName: 'p' })).map((r) => r.runId),
      ['resumed'],
    );
    assert.equal(await admin.zscore(`${prefix}idx:pipeline:p`, 'done'), null);
    assert.deepEqual(
      (await store.listRuns({ pipelineName: 'q' })).map((r) => r.runId),
      ['done'],
    );
  });
});

describe('redisStorage module', () => {
  it('binds a Redis store, and refuses a TTL Redis cannot express when configured', async () => {
    const container = new Container();
    await container.loadAsync(redisStorage({ url: URL, keyPrefix: `wp-test:${randomUUID()}:` }));
    const store = container.get(TOKENS.CheckpointStore);
    assert.ok(store instanceof RedisCheckpointStore);
    assert.equal(store.backend, 'redis');
    await store.close();
    for (const bad of [0, 1.5, -1]) assert.throws(() => redisStorage({ finishedRunTtlSeconds: bad }), withCode('INVALID_OPTIONS'));
  });

  it('close() leaves a client it was given open', async () => {
    const client = new Redis(URL);
    cleanups.push(() => Promise.resolve(client.disconnect()));
    const store = new RedisCheckpointStore({ client, keyPrefix: `wp-test:${randomUUID()}:` });
    assert.equal(await store.getRun('x'), null);
    await store.close();
    assert.equal(await client.ping(), 'PONG');
  });
});

describe('RedisCheckpointStore: outages', () => {
  it('a server that cannot be reached fails fast with STORE_UNAVAILABLE', async () => {
    const store = new RedisCheckpointStore({ url: 'redis://127.0.0.1:1', keyPrefix: `wp-test:${randomUUID()}:` });
    cleanups.push(() => store.close());
    const started = Date.now();
    await assert.rejects(store.getRun('r1'), (err: Error & { code?: string; runId?: string }) => {
      assert.equal(err.code, 'STORE_UNAVAILABLE');
      assert.equal(err.runId, 'r1');
      assert.match(err.message, /redis.*getRun.*'r1'/);
      return true;
    });
    await assert.rejects(store.init(), withCode('STORE_UNAVAILABLE'));
    await assert.rejects(store.acquireLease('r1', 'w', 1_000), withCode('STORE_UNAVAILABLE'));
    assert.ok(Date.now() - started < 2_000, `took ${Date.now() - started} ms`);
  });

  it('a server that goes away mid-run fails fast, and the store recovers when it is back', async () => {
    const proxy = new FlakyProxy(6379);
    const port = await proxy.listen(0);
    const { store } = await freshStore({ url: `redis://127.0.0.1:${port}` });
    cleanups.push(() => proxy.close());
    await leasedRun(store);
    await proxy.close();
    const started = Date.now();
    await assert.rejects(store.getRun('r1'), withCode('STORE_UNAVAILABLE'));
    assert.ok(Date.now() - started < 2_000);
    await proxy.listen(port);
    const deadline = Date.now() + 5_000;
    let run = null;
    while (run === null && Date.now() < deadline) run = await store.getRun('r1').catch(() => sleep(100).then(() => null));
    assert.equal(run?.leaseOwner, 'w1');
  });

  it('a server that stops answering (connection open, no replies) fails after commandTimeoutMs', async () => {
    const proxy = new FlakyProxy(6379);
    const port = await proxy.listen(0);
    cleanups.push(() => proxy.close());
    const { store } = await freshStore({ url: `redis://127.0.0.1:${port}`, commandTimeoutMs: 300 });
    await leasedRun(store);
    proxy.freeze();
    const started = Date.now();
    await assert.rejects(store.getRun('r1'), withCode('STORE_UNAVAILABLE'));
    assert.ok(Date.now() - started < 2_000);
  });
});

/** A TCP proxy to Redis that can drop every connection and stop listening, to simulate an outage. */
class FlakyProxy {
  private server: Server | undefined;
  private readonly sockets = new Set<Socket>();
  constructor(private readonly targetPort: number) {}

  listen(port: number): Promise<number> {
    const server = createServer((client) => {
      const upstream = new Socket();
      for (const s of [client, upstream]) {
        this.sockets.add(s);
        s.on('close', () => this.sockets.delete(s));
        s.on('error', () => {});
      }
      upstream.connect(this.targetPort, '127.0.0.1');
      client.pipe(upstream).pipe(client);
    });
    this.server = server;
    return new Promise((resolve) => server.listen(port, '127.0.0.1', () => resolve((server.address() as { port: number }).port)));
  }

  /** Keeps the connections open but stops forwarding: a hung server, from the client's side. */
  freeze(): void {
    for (const s of this.sockets) s.unpipe();
    for (const s of this.sockets) s.removeAllListeners('data');
  }

  async close(): Promise<void> {
    for (const s of this.sockets) s.destroy();
    const server = this.server;
    this.server = undefined;
    if (server) await new Promise<void>((resolve) => server.close(() => resolve()));
  }
}
