import 'reflect-metadata';
import { strict as assert } from 'node:assert';
import { after, before, describe, it } from 'node:test';
import { Agent, CheckpointCorruptedError, memoryStorage, Pipeline, readPlan, Step, SystemClock, Waypoint, type StepContext } from '../../src/index';
import { resumeBaseKey, takeResumeBase } from '../../src/core/history/resume-base';
import { linkOf, SYSTEM_AGENT, systemRow } from '../../src/core/history/row-integrity';
import { serialize } from '../../src/core/state/serializer';

/*
 * A resume snapshot is built by replaying the rows it folds without checking them again inside the replay
 * (the read that fetched them checked them): these tests hold that every row it folds is still checked, on
 * both reads (from an earlier snapshot, or every row), and that a base row's link, which the checks read
 * once per row object, follows the row's output.
 */

const hooks: { stopAt?: number; stop?: AbortController; seen: number } = { seen: 0 };

class Writer extends Agent {
  @Step() one(ctx: StepContext) {
    return tick(ctx, 'one');
  }
  @Step() two(ctx: StepContext) {
    return tick(ctx, 'two');
  }
  @Step() three(ctx: StepContext) {
    return tick(ctx, 'three');
  }
}

function tick(ctx: StepContext, name: string) {
  hooks.seen += 1;
  if (hooks.stopAt !== undefined && hooks.seen >= hooks.stopAt) hooks.stop?.abort('test: pause');
  return { [name]: `${name} of ${String(ctx.state.subject)}` };
}

class Reviewer extends Agent {
  @Step() review() {
    return { reviewed: true };
  }
}

@Pipeline({ name: 'snapshot-checked-rows', version: '1', agents: [Writer, Reviewer] })
class Checked {}

describe('a resume snapshot folds only rows that pass their checks', () => {
  const plan = readPlan(Checked);
  let waypoint: Waypoint;
  before(async () => {
    waypoint = await Waypoint.create({ modules: [memoryStorage()], pipelines: [Checked] });
  });
  after(() => waypoint.close());

  async function paused(runId: string, stopAt: number) {
    hooks.seen = 0;
    hooks.stopAt = stopAt;
    hooks.stop = new AbortController();
    const result = await waypoint.run(Checked, { runId, input: { subject: 's' }, signal: hooks.stop.signal });
    hooks.stopAt = undefined;
    assert.equal(result.status, 'paused');
    return (await waypoint.store.getRun(runId))!;
  }

  /** Alters row `sequence`'s output in place, keeping its digest (what a bad disk or a hand edit does). */
  async function alter(runId: string, sequence: number) {
    const row = (await waypoint.store.listSteps(runId, { fromSequence: sequence, toSequence: sequence }))[0];
    const outcome = await waypoint.store.rewritePayloads(runId, { steps: [{ sequence, output: { from: row.output, to: row.output.replace('of s', 'of X') } }] });
    assert.equal(outcome.rewritten, 1);
  }

  const parts = () => ({ store: waypoint.store, clock: new SystemClock(), integrity: {} });

  it('refuses to take the first snapshot over an altered row: nothing is written', async () => {
    const run = await paused('first', 3);
    await alter('first', 2);
    await assert.rejects(
      takeResumeBase(parts(), plan, 'first', { epoch: run.leaseEpoch }),
      (error: unknown) => error instanceof CheckpointCorruptedError && /sequence 2|row 2/.test(error.message),
    );
    assert.equal(await waypoint.store.getOperation(resumeBaseKey('first')), null);
  });

  it('refuses to take a snapshot over an altered row after an earlier snapshot: the earlier one stays', async () => {
    const run = await paused('later', 2);
    assert.notEqual(await takeResumeBase(parts(), plan, 'later', { epoch: run.leaseEpoch }), null, 'a first snapshot');
    const first = (await waypoint.store.getOperation(resumeBaseKey('later')))!.result;
    const resumed = await (async () => {
      hooks.seen = 0;
      hooks.stopAt = 1;
      hooks.stop = new AbortController();
      return waypoint.resume('later', { signal: hooks.stop.signal }).finally(() => (hooks.stopAt = undefined));
    })();
    assert.equal(resumed.status, 'paused');
    const now = (await waypoint.store.getRun('later'))!;
    const rows = await waypoint.store.listSteps('later');
    const lastStep = rows.filter((row) => row.agentId !== SYSTEM_AGENT).at(-1)!;
    assert.equal(lastStep.stepName, 'three', 'the resume ran one step after the snapshot');
    await alter('later', lastStep.sequence);
    await assert.rejects(takeResumeBase(parts(), plan, 'later', { epoch: now.leaseEpoch }), CheckpointCorruptedError);
    assert.equal((await waypoint.store.getOperation(resumeBaseKey('later')))!.result, first);
  });

  it("reads a base row's link from its output as it is now, on the row and on a copy of it", () => {
    const base = systemRow('r', 5, 'base', serialize({ replaces: 'v2:aaa', state: {} }), null, new Date(), {}, { identity: 'x', prev: '' });
    assert.equal(base.agentId, SYSTEM_AGENT);
    assert.equal(linkOf(base), 'v2:aaa');
    base.output = serialize({ replaces: 'v2:bbb', state: {} });
    assert.equal(linkOf(base), 'v2:bbb');
    assert.equal(linkOf({ ...base, output: serialize({ replaces: 'v2:ccc' }) }), 'v2:ccc');
    assert.equal(linkOf({ ...base }), 'v2:bbb');
  });
});
