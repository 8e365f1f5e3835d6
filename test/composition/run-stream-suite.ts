import 'reflect-metadata';
import { strict as assert } from 'node:assert';
import { resolve } from 'node:path';
import { after, afterEach, before, describe, it } from 'node:test';
import type { ContainerModule } from 'inversify';
import { Agent, Pipeline, Step, Waypoint, dropStreams, visibleParts, type CreateOptions, type RunStreamEvent, type RunStreamReader, type StreamEvent } from '../../src/index';
import { killLiveChildren, spawnNode, waitForLine } from '../helpers/child-process';
import { leasedRun } from '../helpers/store-records';

// waypoint.stream (issue 37, the reading side) on one backend. Events are written with the store's
// appendEvents by a Waypoint of their own (another store object on the same data), read by another.
// Nothing is timed: a test waits for what it needs (a pending next(), a count of store calls).

/** How a child process opens the same data (test/helpers/stream-reader-child.ts). */
export interface ChildSpec {
  kind: 'sqlite' | 'postgres' | 'redis' | 'tiered';
  file?: string;
  schema?: string;
  prefix?: string;
  encrypted?: boolean;
}

export interface StreamBackend {
  name: string;
  /** Modules of a new store object on the backend's data (each call). */
  modules(): ContainerModule[];
  options?: CreateOptions;
  /** Absent: no reader in another process (memory). */
  child?: ChildSpec;
  dispose(): Promise<void>;
}

const READER_CHILD = resolve(__dirname, '../helpers/stream-reader-child.js');

class Writer extends Agent {
  @Step() draft() {
    return { done: true };
  }
}

@Pipeline({ name: 'stream-reader-suite', version: '1.0.0', agents: [Writer] })
class StreamedPipeline {}

/** Attempts of Drafter.draft per run: its first attempt fails, so its row records attempt 2. */
const draftAttempts = new Map<string, number>();

class Drafter extends Agent {
  @Step({ retries: { maxAttempts: 2, initialDelayMs: 1, jitter: false } }) draft(ctx: { runId: string }) {
    const n = (draftAttempts.get(ctx.runId) ?? 0) + 1;
    draftAttempts.set(ctx.runId, n);
    if (n === 1) throw new Error('first draft lost');
    return { drafted: true };
  }
  @Step() polish() {
    return { polished: true };
  }
}

@Pipeline({ name: 'stream-reader-fork', version: '1.0.0', agents: [Drafter] })
class ForkedPipeline {}

export const part = (step: string, attempt: number, value: unknown): StreamEvent => ({ kind: 'part', step, attempt, data: JSON.stringify(value) });
const STEP = 'Writer/draft';

/** Every event of a reader, until it ends. */
export async function drain(reader: AsyncIterable<RunStreamEvent>): Promise<RunStreamEvent[]> {
  const events: RunStreamEvent[] = [];
  for await (const event of reader) events.push(event);
  return events;
}

/** Counts the store calls of a Waypoint's store: waits in progress and run reads, with a hook per read. */
function spyOn(waypoint: Waypoint) {
  const store = waypoint.store;
  const spy = { activeWaits: 0, waits: 0, runReads: 0, onRead: (): void => undefined };
  const wait = store.waitForEvents!.bind(store);
  store.waitForEvents = async (runId, from, signal) => {
    spy.activeWaits++;
    spy.waits++;
    try {
      return await wait(runId, from, signal);
    } finally {
      spy.activeWaits--;
    }
  };
  const getRun = store.getRun.bind(store);
  store.getRun = async (runId) => {
    const run = await getRun(runId);
    spy.runReads++;
    spy.onRead();
    return run;
  };
  return spy;
}

/** Resolves once `condition` holds, checked after each run read of the spied store. */
function afterReads(spy: ReturnType<typeof spyOn>, condition: () => boolean): Promise<void> {
  return new Promise((done) => {
    spy.onRead = () => {
      if (condition()) done();
    };
  });
}

const settledYet = async (promise: Promise<unknown>): Promise<boolean> => {
  let settled = false;
  void promise.then(
    () => (settled = true),
    () => (settled = true),
  );
  await new Promise((r) => setImmediate(r));
  return settled;
};

/** `crossProcess`: whether a reader in a child process can open the backend's data (not memory). */
export function defineRunStreamSuite(make: () => Promise<StreamBackend>, crossProcess = true): void {
  let backend: StreamBackend;
  let writer: Waypoint;
  let reader: Waypoint;
  let n = 0;
  const open = () => Waypoint.create({ ...backend.options, modules: backend.modules() });

  before(async () => {
    backend = await make();
  });
  after(async () => {
    await killLiveChildren();
    await backend.dispose();
  });
  afterEach(async () => {
    await killLiveChildren();
    await writer?.close();
    await reader?.close();
  });

  /** A new leased run on the writer's store and its appender. */
  async function freshRun() {
    writer = await open();
    reader = await open();
    const runId = `stream-${++n}-${Date.now().toString(36)}`;
    const epoch = await leasedRun(writer.store, runId);
    const append = (...events: StreamEvent[]) => writer.store.appendEvents!(runId, events, { epoch });
    const end = async (status: 'completed' | 'failed' | 'cancelled') => {
      await writer.store.updateRun(runId, { status }, { epoch });
      await append({ kind: 'status', status });
    };
    return { runId, epoch, append, end };
  }

  describe(`waypoint.stream follows a run's stream`, { timeout: 60_000 }, () => {
    it('from 0, woken by appends of another store object, until the run ends; retractions applied by visibleParts', async () => {
      const { runId, append, end } = await freshRun();
      const stream = reader.stream(runId, { idleCheckMs: 50 });
      const first = stream.next(); // waits: nothing is stored yet
      await append({ kind: 'status', status: 'running' });
      assert.deepEqual((await first).value, { offset: 0, kind: 'status', status: 'running' });
      const second = stream.next();
      await append(part(STEP, 1, 'Hel'), part(STEP, 1, { type: 'text-delta', text: 'lo' }));
      assert.deepEqual((await second).value, { offset: 1, kind: 'part', step: STEP, attempt: 1, data: 'Hel' });
      await append({ kind: 'retract', step: STEP, attempt: 1 });
      await append(part(STEP, 2, 'Hello'), part(STEP, 2, ' world'));
      await end('completed');
      const rest = await drain(stream);
      const events = [(await first).value!, (await second).value!, ...rest];
      assert.deepEqual(
        events.map((e) => e.offset),
        [0, 1, 2, 3, 4, 5, 6],
      );
      assert.deepEqual(rest[1], { offset: 3, kind: 'retract', step: STEP, attempt: 1 });
      assert.deepEqual(rest.at(-1), { offset: 6, kind: 'status', status: 'completed' });
      assert.deepEqual(
        visibleParts(events).map((p) => [p.offset, p.attempt, p.data]),
        [
          [4, 2, 'Hello'],
          [5, 2, ' world'],
        ],
      );
    });

    it('reconnecting with from several times while the run writes: the union is every event, none twice', async () => {
      const { runId, append, end } = await freshRun();
      const writing = (async () => {
        await append({ kind: 'status', status: 'running' });
        for (let batch = 0; batch < 12; batch++) {
          await append(...Array.from({ length: 5 }, (_, i) => part(STEP, 1, `p${batch * 5 + i}`)));
          await new Promise((r) => setImmediate(r));
        }
        await end('completed');
      })();
      const seen: RunStreamEvent[] = [];
      let sessions = 0;
      for (let ended = false; !ended;) {
        sessions++;
        ended = true;
        for await (const event of reader.stream(runId, { from: seen.length === 0 ? 0 : seen.at(-1)!.offset + 1, idleCheckMs: 50 })) {
          seen.push(event);
          if (seen.length % 7 === 0) {
            ended = false;
            break;
          }
        }
      }
      await writing;
      assert.ok(sessions >= 9, `${sessions} sessions`);
      assert.deepEqual(
        seen.map((e) => e.offset),
        Array.from({ length: 62 }, (_, i) => i),
      );
      assert.deepEqual(
        visibleParts(seen).map((p) => p.data),
        Array.from({ length: 60 }, (_, i) => `p${i}`),
      );
    });

    it('the run moving to another worker (a new lease epoch, another store object) does not disturb a reader', async () => {
      const { runId, epoch, append } = await freshRun();
      const stream = reader.stream(runId, { idleCheckMs: 50 });
      await append({ kind: 'status', status: 'running' }, part(STEP, 1, 'first worker'));
      assert.equal((await stream.next()).value?.offset, 0);
      assert.equal((await stream.next()).value?.offset, 1);
      // The first worker dies; its lease is released (expired) and another process takes the run.
      await writer.store.releaseLease(runId, 'worker-a', epoch);
      const other = await open();
      try {
        const grant = await other.store.acquireLease(runId, 'worker-b', 60_000);
        assert.ok(grant && grant.epoch > epoch);
        const pending = stream.next();
        await other.store.appendEvents!(runId, [{ kind: 'retract', step: STEP, attempt: 1 }, { kind: 'status', status: 'running' }, part(STEP, 2, 'second worker')], {
          epoch: grant.epoch,
        });
        await assert.rejects(append(part(STEP, 1, 'stale')), { code: 'LEASE_LOST' });
        await other.store.updateRun(runId, { status: 'completed' }, { epoch: grant.epoch });
        await other.store.appendEvents!(runId, [{ kind: 'status', status: 'completed' }], { epoch: grant.epoch });
        const rest = [(await pending).value!, ...(await drain(stream))];
        assert.deepEqual(
          rest.map((e) => e.offset),
          [2, 3, 4, 5],
        );
        assert.deepEqual(
          visibleParts(rest).map((p) => p.data),
          ['second worker'],
        );
      } finally {
        await other.close();
      }
    });

    it('follow: false reads what is stored and ends although the run goes on; from skips what was seen', async () => {
      const { runId, append } = await freshRun();
      await append({ kind: 'status', status: 'running' }, part(STEP, 1, 'a'), part(STEP, 1, 'b'));
      assert.deepEqual(
        (await drain(reader.stream(runId, { follow: false }))).map((e) => e.offset),
        [0, 1, 2],
      );
      assert.deepEqual(await drain(reader.stream(runId, { follow: false, from: 2 })), [{ offset: 2, kind: 'part', step: STEP, attempt: 1, data: 'b' }]);
      assert.deepEqual(await drain(reader.stream(runId, { follow: false, from: 9 })), []);
    });

    it('a run that ended without status events (an older run, a real run here) ends the reader', async () => {
      writer = await open();
      reader = await open();
      const runId = `stream-real-${Date.now().toString(36)}`;
      const result = await writer.run(StreamedPipeline, { runId, input: {} });
      assert.equal(result.status, 'completed');
      assert.equal((await reader.get(runId))?.status, 'completed');
      const events = await drain(reader.stream(runId, { idleCheckMs: 20 }));
      const statuses = events.filter((e) => e.kind === 'status');
      // Once the runtime writes status events (the writer side of issue 37), the last one says completed.
      if (statuses.length > 0) assert.equal(statuses.at(-1)!.kind === 'status' && statuses.at(-1)!.status, 'completed');
      assert.deepEqual(
        events.map((e) => e.offset),
        events.map((_, i) => i),
      );
    });
  });

  describe('waypoint.stream stays open while the run may go on', { timeout: 60_000 }, () => {
    for (const status of ['paused', 'waiting'] as const) {
      it(`a ${status} run keeps the reader open; it ends when the run completes`, async () => {
        const { runId, epoch, append, end } = await freshRun();
        const spy = spyOn(reader);
        await append({ kind: 'status', status: 'running' }, part(STEP, 1, 'x'));
        await writer.store.updateRun(runId, { status }, { epoch });
        await append(status === 'waiting' ? { kind: 'status', status, detail: 'approval' } : { kind: 'status', status });
        const stream = reader.stream(runId, { idleCheckMs: 5 });
        const events: RunStreamEvent[] = [];
        for (let i = 0; i < 3; i++) events.push((await stream.next()).value!);
        const looked = spy.runReads;
        const pending = stream.next();
        await afterReads(spy, () => spy.runReads >= looked + 4);
        assert.equal(await settledYet(pending), false, `the reader of a ${status} run ended`);
        await writer.store.updateRun(runId, { status: 'running' }, { epoch });
        await append({ kind: 'status', status: 'running' });
        await end('completed');
        events.push((await pending).value!, ...(await drain(stream)));
        assert.deepEqual(
          events.map((e) => (e.kind === 'status' ? `${e.status}${e.detail ? `:${e.detail}` : ''}` : e.kind)),
          ['running', 'part', status === 'waiting' ? 'waiting:approval' : status, 'running', 'completed'],
        );
      });
    }

    it('a failed status event does not end the reader while the run record is not terminal (a retry follows)', async () => {
      const { runId, epoch, append, end } = await freshRun();
      const spy = spyOn(reader);
      await append({ kind: 'status', status: 'running' }, part(STEP, 1, 'a'), { kind: 'retract', step: STEP, attempt: 1 }, { kind: 'status', status: 'failed' });
      const stream = reader.stream(runId, { idleCheckMs: 5 });
      for (let i = 0; i < 4; i++) await stream.next();
      const pending = stream.next();
      await afterReads(spy, () => spy.runReads >= 6);
      assert.equal(await settledYet(pending), false, 'ended on a failed event with the record still running');
      await append({ kind: 'status', status: 'running' }, part(STEP, 2, 'b'));
      await writer.store.updateRun(runId, { status: 'running' }, { epoch });
      await end('completed');
      const rest = [(await pending).value!, ...(await drain(stream))];
      assert.deepEqual(
        rest.map((e) => e.offset),
        [4, 5, 6],
      );
    });

    it('the terminal event written before the record is not missed: the reader ends after both', async () => {
      const { runId, epoch, append } = await freshRun();
      await append({ kind: 'status', status: 'running' }, part(STEP, 1, 'a'));
      const reading = drain(reader.stream(runId, { idleCheckMs: 5 }));
      await append({ kind: 'status', status: 'cancelled' });
      await writer.store.updateRun(runId, { status: 'cancelled' }, { epoch });
      assert.deepEqual(
        (await reading).map((e) => e.offset),
        [0, 1, 2],
      );
    });
  });

  describe("a run's stream and retention", { timeout: 60_000 }, () => {
    it('fork copies the parts of the copied steps, of their recorded attempts, renumbered from 0, then a paused status', async () => {
      writer = await open();
      reader = await open();
      const runId = `stream-fork-${Date.now().toString(36)}`;
      assert.equal((await writer.run(ForkedPipeline, { runId, input: {} })).status, 'completed');
      const [draftRow] = await writer.store.listSteps(runId);
      assert.equal(draftRow.attempt, 2, 'the draft step recorded its second attempt');
      // What the steps emitted (appended unfenced here: the run is over), among what the runtime wrote.
      const emit = (...events: StreamEvent[]) => writer.store.appendEvents!(runId, events);
      await emit(part('Drafter/draft', 1, 'lost'), { kind: 'retract', step: 'Drafter/draft', attempt: 1 }, part('Drafter/draft', 2, 'Hel'));
      await emit(part('Drafter/draft', 2, { type: 'text-delta', text: 'lo' }), part('Drafter/polish', 1, 'shiny'));
      await reader.fork(runId, { newRunId: `${runId}-a`, fromStep: 'Drafter/polish' });
      const forked = await drain(reader.stream(`${runId}-a`, { follow: false }));
      assert.deepEqual(forked, [
        { offset: 0, kind: 'part', step: 'Drafter/draft', attempt: 2, data: 'Hel' },
        { offset: 1, kind: 'part', step: 'Drafter/draft', attempt: 2, data: { type: 'text-delta', text: 'lo' } },
        { offset: 2, kind: 'status', status: 'paused', detail: `forked from '${runId}' at sequence 1` },
      ]);
      await reader.fork(runId, { newRunId: `${runId}-b`, fromSequence: 2 });
      assert.deepEqual(
        visibleParts(await drain(reader.stream(`${runId}-b`, { follow: false }))).map((p) => p.data),
        ['Hel', { type: 'text-delta', text: 'lo' }, 'shiny'],
      );
      await reader.fork(runId, { newRunId: `${runId}-c`, fromSequence: 0 });
      assert.deepEqual(
        (await drain(reader.stream(`${runId}-c`, { follow: false }))).map((e) => e.kind),
        ['status'],
      );
    });

    it('prune deletes a finished run with its stream; the stream of a run it keeps is untouched', async () => {
      const { runId, append, end } = await freshRun();
      await append({ kind: 'status', status: 'running' }, part(STEP, 1, 'gone'));
      await end('completed');
      const kept = `${runId}-kept`;
      const epoch = await leasedRun(writer.store, kept);
      await writer.store.appendEvents!(kept, [part(STEP, 1, 'kept')], { epoch });
      const pruned = await reader.retention.prune(new Date(Date.now() + 60_000));
      assert.ok(pruned.includes(runId) && !pruned.includes(kept), 'the finished run is pruned, the running one kept');
      assert.equal(await reader.store.streamLength!(runId), 0);
      assert.equal(await reader.store.streamLength!(kept), 1);
      assert.deepEqual(await drain(reader.stream(runId, { follow: false })).catch((e: { code?: string }) => e.code), 'RUN_NOT_FOUND');
    });
  });

  describe('dropStreams: the streams of finished runs go, the runs stay', { timeout: 60_000 }, () => {
    it('drops completed and cancelled runs older than the cutoff, not failed, running or newer ones; a dry run only counts', async () => {
      const done = await freshRun();
      await done.append({ kind: 'status', status: 'running' }, part(STEP, 1, 'a'), part(STEP, 1, 'b'));
      await done.end('completed');
      const others: Record<string, 'failed' | 'cancelled' | 'running'> = {
        [`${done.runId}-failed`]: 'failed',
        [`${done.runId}-cancelled`]: 'cancelled',
        [`${done.runId}-running`]: 'running',
      };
      for (const [runId, status] of Object.entries(others)) {
        const epoch = await leasedRun(writer.store, runId);
        await writer.store.appendEvents!(runId, [part(STEP, 1, status)], { epoch });
        if (status !== 'running') await writer.store.updateRun(runId, { status }, { epoch });
      }
      const mine = (list: { runId: string; events: number }[]) => list.filter((d) => d.runId.startsWith(done.runId)).sort((a, b) => a.runId.localeCompare(b.runId));
      assert.deepEqual(mine(await dropStreams(reader.store, { olderThan: new Date(Date.now() - 60_000) })), [], 'nothing is that old');
      const expected = [
        { runId: done.runId, events: 4 },
        { runId: `${done.runId}-cancelled`, events: 1 },
      ];
      const future = new Date(Date.now() + 60_000);
      assert.deepEqual(mine(await dropStreams(reader.store, { olderThan: future, dryRun: true })), expected);
      assert.equal(await reader.store.streamLength!(done.runId), 4, 'a dry run drops nothing');
      assert.deepEqual(mine(await dropStreams(reader.store, { olderThan: future })), expected);
      assert.deepEqual(await drain(reader.stream(done.runId, { follow: false })), []);
      assert.equal(await reader.store.streamLength!(`${done.runId}-cancelled`), 0);
      assert.equal(await reader.store.streamLength!(`${done.runId}-failed`), 1, 'a failed run may be resumed: its stream stays');
      assert.equal(await reader.store.streamLength!(`${done.runId}-running`), 1);
      assert.equal((await reader.get(done.runId))?.status, 'completed', 'the run stays');
      await assert.rejects(dropStreams(reader.store, { olderThan: future, statuses: ['failed' as 'completed'] }), { code: 'INVALID_ARGUMENT' });
    });
  });

  describe('waypoint.stream releases what it holds', { timeout: 60_000 }, () => {
    it('return() while next() waits: the pending next resolves done and no store wait is left', async () => {
      const { runId } = await freshRun();
      const spy = spyOn(reader);
      const stream = reader.stream(runId);
      const pending = stream.next();
      while (spy.activeWaits === 0) await new Promise((r) => setImmediate(r));
      await stream.return();
      assert.deepEqual(await pending, { done: true, value: undefined });
      assert.equal(spy.activeWaits, 0);
      assert.deepEqual(await stream.next(), { done: true, value: undefined });
    });

    it('break out of for await, and an aborted signal, end the read with no store wait left', async () => {
      const { runId, append } = await freshRun();
      const spy = spyOn(reader);
      await append(part(STEP, 1, 'a'), part(STEP, 1, 'b'));
      for await (const event of reader.stream(runId)) {
        assert.equal(event.offset, 0);
        break;
      }
      const controller = new AbortController();
      const stream: RunStreamReader = reader.stream(runId, { from: 2, signal: controller.signal });
      const pending = stream.next();
      while (spy.activeWaits === 0) await new Promise((r) => setImmediate(r));
      controller.abort();
      assert.deepEqual(await pending, { done: true, value: undefined });
      assert.equal(spy.activeWaits, 0);
    });

    it('an unknown run is RUN_NOT_FOUND; a bad from is INVALID_ARGUMENT', async () => {
      await freshRun();
      await assert.rejects(reader.stream('no-such-run').next(), { code: 'RUN_NOT_FOUND' });
      await assert.rejects(reader.stream('no-such-run', { from: -1 }).next(), { code: 'INVALID_ARGUMENT' });
    });
  });

  if (!crossProcess) return;
  describe('a reader in another process', { timeout: 120_000 }, () => {
    it('follows from 0 and, reconnecting with from, reads the union of all events once, while this process appends', async () => {
      assert.ok(backend.child, 'a cross-process backend names how a child opens its data');
      const { runId, append, end } = await freshRun();
      await append({ kind: 'status', status: 'running' });
      const spec = JSON.stringify(backend.child);
      const follower = spawnNode(READER_CHILD, [spec, runId, '0']);
      const reconnecting = spawnNode(READER_CHILD, [spec, runId, '4']);
      await waitForLine(follower, (line) => line.startsWith('{"offset":0,'));
      await waitForLine(reconnecting, (line) => line.startsWith('{"offset":0,'));
      for (let batch = 0; batch < 10; batch++) await append(...Array.from({ length: 3 }, (_, i) => part(STEP, 1, { type: 'text-delta', text: `t${batch * 3 + i}` })));
      await end('completed');
      for (const child of [follower, reconnecting]) {
        const exit = await child.exited;
        assert.equal(exit.code, 0, exit.stderr);
        const events = exit.lines.filter((l) => l.startsWith('{')).map((l) => JSON.parse(l) as RunStreamEvent);
        assert.deepEqual(
          events.map((e) => e.offset),
          Array.from({ length: 32 }, (_, i) => i),
        );
        assert.deepEqual(
          visibleParts(events).map((p) => (p.data as { text: string }).text),
          Array.from({ length: 30 }, (_, i) => `t${i}`),
        );
      }
    });
  });
}
