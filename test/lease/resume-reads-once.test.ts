import 'reflect-metadata';
import { strict as assert } from 'node:assert';
import { after, before, describe, it } from 'node:test';
import { Agent, Pipeline, sqliteStorage, Step, Waypoint, type StepContext } from '../../src/index';
import { tempSqlitePath } from '../helpers/sqlite-temp';

/*
 * A resume checks a run's rows before it takes the lease (a corrupted run is refused before anything is
 * written for it) and restores from them under the lease. When nothing moved in between, the rows read for
 * the check are the rows restored from: one read, not two. When another executor advanced the run in
 * between, the resume reads again and continues from where that executor left it. Two Waypoints on one
 * SQLite file stand for two processes.
 */

const ran: string[] = [];
const stops: { after?: string; signal?: AbortController } = {};

function step(name: string) {
  return (ctx: StepContext) => {
    ran.push(`${ctx.runId}:${name}`);
    if (stops.after === name) stops.signal?.abort('test: pause');
    return { [name]: true };
  };
}

class Steps extends Agent {
  @Step() s1(ctx: StepContext) {
    return step('s1')(ctx);
  }
  @Step() s2(ctx: StepContext) {
    return step('s2')(ctx);
  }
  @Step() s3(ctx: StepContext) {
    return step('s3')(ctx);
  }
  @Step() s4(ctx: StepContext) {
    return step('s4')(ctx);
  }
  @Step() s5(ctx: StepContext) {
    return step('s5')(ctx);
  }
}

@Pipeline({ name: 'resume-reads-once', version: '1', agents: [Steps] })
class Five {}

describe('a resume reads the rows it checked once, unless the run moved before the lease', () => {
  const db = tempSqlitePath();
  let a: Waypoint;
  let b: Waypoint;
  before(async () => {
    a = await Waypoint.create({ modules: [sqliteStorage({ path: db.file })], pipelines: [Five], workerId: 'worker-a' });
    b = await Waypoint.create({ modules: [sqliteStorage({ path: db.file })], pipelines: [Five], workerId: 'worker-b' });
    // B stands for another process: in one process, Waypoints on one database share their claims on runs
    // (by the store's location), which would stop B before the lease this test is about.
    Object.defineProperty(b.store, 'location', { get: () => undefined, configurable: true });
  });
  after(async () => {
    await a.close();
    await b.close();
    db.remove();
  });

  function pauseAfter(name: string): AbortSignal {
    stops.after = name;
    stops.signal = new AbortController();
    return stops.signal.signal;
  }

  /** Counts the row reads of `waypoint`'s store (loadRun, listSteps) while `fn` runs. */
  async function rowReads<T>(waypoint: Waypoint, fn: () => Promise<T>): Promise<{ result: T; reads: number }> {
    const store = waypoint.store;
    const loadRun = store.loadRun.bind(store);
    const listSteps = store.listSteps.bind(store);
    let reads = 0;
    store.loadRun = (runId) => ((reads += 1), loadRun(runId));
    store.listSteps = (runId, range) => ((reads += 1), listSteps(runId, range));
    try {
      return { result: await fn(), reads };
    } finally {
      store.loadRun = loadRun;
      store.listSteps = listSteps;
    }
  }

  it('reads the rows once when nothing moved between the check and the lease', async () => {
    assert.equal((await a.run(Five, { runId: 'still', input: {}, signal: pauseAfter('s2') })).status, 'paused');
    const { result, reads } = await rowReads(a, () => a.resume('still'));
    assert.equal(result.status, 'completed');
    assert.equal(reads, 1, 'the check before the lease read the rows; the restore used them');
    assert.deepEqual(
      ran.filter((r) => r.startsWith('still:')),
      ['s1', 's2', 's3', 's4', 's5'].map((s) => `still:${s}`),
    );
  });

  it('reads again and continues from the other executor when the run moved before the lease', async () => {
    assert.equal((await a.run(Five, { runId: 'moved', input: {}, signal: pauseAfter('s1') })).status, 'paused');
    // Between A's check and A's lease, B resumes the run, runs s2 and s3, and pauses (releasing the lease).
    const acquire = a.store.acquireLease.bind(a.store);
    let raced = false;
    a.store.acquireLease = async (...args) => {
      if (!raced) {
        raced = true;
        assert.equal((await b.resume('moved', { signal: pauseAfter('s3') })).status, 'paused');
      }
      return acquire(...args);
    };
    try {
      const { result, reads } = await rowReads(a, () => a.resume('moved'));
      assert.equal(result.status, 'completed');
      assert.equal(reads, 2, 'the rows were read again under the lease');
      assert.deepEqual(result.state, { s1: true, s2: true, s3: true, s4: true, s5: true });
    } finally {
      a.store.acquireLease = acquire;
    }
    assert.deepEqual(
      ran.filter((r) => r.startsWith('moved:')),
      ['s1', 's2', 's3', 's4', 's5'].map((s) => `moved:${s}`),
      'every step ran once: A went on from where B paused',
    );
  });
});
