import 'reflect-metadata';
import { strict as assert } from 'node:assert';
import { after, before, describe, it } from 'node:test';
import { IsInt, IsOptional, IsString } from 'class-validator';
import type { ContainerModule } from 'inversify';
import { Agent, loop, Pipeline, readPlan, Step, Waypoint, type StepContext } from '../../src/index';
import { loadRunProgress } from '../../src/core/history/progress-reads';
import { runProgress, type RunProgress } from '../../src/core/history/run-progress';
import type { PipelinePlan } from '../../src/core/plan/plan-types';
import { ReadApi } from '../../src/ui/read-api';
import { RESUME_BASE_EVERY, resumeBaseKey } from '../../src/core/history/resume-base';
import { syntheticPipeline } from '../helpers/synthetic-pipeline';
import { countRows } from '../helpers/count-rows';

/*
 * Resume snapshots (issue 40): a resumed long run reads its run row, its resume snapshot and the rows after
 * it, not every row, and ends in the state an uninterrupted run ends in; a run with no snapshot (as an
 * earlier release recorded it) or with one that no longer fits its rows resumes from every row, as before.
 * Written once, run per backend (resume-snapshot-<backend>.test.ts).
 */

class LoopState {
  @IsString() subject!: string;
  @IsOptional() @IsInt() at?: number;
  @IsOptional() @IsString() value?: string;
}

const loopHooks: { onTick?: (at: number) => void } = {};
const LOOP_ITERATIONS = 600;

class Tick extends Agent {
  @Step() tick(ctx: StepContext<LoopState>) {
    const at = (ctx.state.at ?? 0) + 1;
    loopHooks.onTick?.(at);
    return { at, value: `v${at}` };
  }
}

@Pipeline({ name: 'snapshot-loop', version: '1.0.0', state: LoopState, agents: [loop<LoopState>({ until: (s) => (s.at ?? 0) >= LOOP_ITERATIONS, maxIterations: 1000 }, Tick)] })
class SnapshotLoop {}

const LONG_ITERATIONS = 5003;

@Pipeline({
  name: 'snapshot-loop-5k',
  version: '1.0.0',
  state: LoopState,
  agents: [loop<LoopState>({ until: (s) => (s.at ?? 0) >= LONG_ITERATIONS, maxIterations: 10_000 }, Tick)],
})
class LongSnapshotLoop {}

export function resumeSnapshotSuite(name: string, storage: () => ContainerModule, cleanup?: () => Promise<void>): void {
  describe(`resume snapshots of long runs on ${name}`, { timeout: 300_000 }, () => {
    let waypoint: Waypoint;
    let counter: { rows: number; counting: boolean };
    before(async () => {
      waypoint = await Waypoint.create({ modules: [storage()] });
      counter = countRows(waypoint.store);
    });
    after(async () => {
      await waypoint?.close();
      await cleanup?.();
    });

    /**
     * The views of a paused tree run with a resume snapshot (run info, the runs list, the page's list) count its
     * progress from the snapshot and the rows after it: each reads about RESUME_BASE_EVERY rows, not every row
     * (a 5,000-iteration loop has 10,000), and shows the figure counted from every row.
     */
    async function viewsReadTheTail(runId: string, plan: PipelinePlan, rows: number): Promise<void> {
      const loaded = (await waypoint.store.loadRun(runId))!;
      const everyRow = runProgress(loaded.run, loaded.steps, plan);
      const page = new ReadApi(waypoint.store, { plans: new Map([[plan.name, plan]]), integrity: {}, actionsAllowed: false });
      const views: [string, () => Promise<RunProgress | undefined>][] = [
        ['waypoint.get', async () => (await waypoint.get(runId))?.progress],
        ['waypoint.list', async () => (await waypoint.list({ pipelineName: plan.name })).find((r) => r.runId === runId)?.progress],
        [
          'the page list',
          async () => {
            const view = (await page.listRuns(new URLSearchParams({ pipeline: plan.name }))).runs.find((r) => r.runId === runId);
            return view && { recorded: view.progress.done, planned: view.progress.total };
          },
        ],
      ];
      for (const [name, read] of views) {
        counter.rows = 0;
        counter.counting = true;
        const progress = await read().finally(() => (counter.counting = false));
        assert.ok(counter.rows <= RESUME_BASE_EVERY + 2, `${name}: progress read ${counter.rows} rows of ${rows}`);
        assert.deepEqual(progress, everyRow, name);
      }
    }

    /** Runs a straight line of `steps` steps and pauses it once `pauseAt` steps have started; returns the pipeline and its hook. */
    async function pausedLine(runId: string, steps: number, pauseAt: number) {
      const hook: { onStep?: (index: number) => void } = {};
      const pipeline = syntheticPipeline({ name: `snap_${runId.replace(/-/g, '_')}`, steps, flatState: true, onStep: (_ctx, index) => hook.onStep?.(index) });
      const stop = new AbortController();
      hook.onStep = (index) => {
        if (index + 1 >= pauseAt) stop.abort('test: pause');
      };
      const first = await waypoint.run(pipeline, { runId, input: {}, signal: stop.signal });
      assert.equal(first.status, 'paused');
      return { pipeline, hook, recorded: (await waypoint.store.getRun(runId))!.lastSequence };
    }

    /** Resumes `runId` to its end, counting the rows read until its first new step starts. */
    async function resumeCounting(runId: string, hook: { onStep?: (index: number) => void }) {
      let before: number | null = null;
      hook.onStep = () => {
        before ??= counter.rows;
      };
      counter.rows = 0;
      counter.counting = true;
      try {
        const result = await waypoint.resume(runId);
        return { result, rowsRead: before ?? counter.rows };
      } finally {
        counter.counting = false;
        hook.onStep = undefined;
      }
    }

    it('a paused straight line of 1,100 rows resumes from its snapshot, reading a tail of rows, to the uninterrupted state', async () => {
      const { pipeline, hook, recorded } = await pausedLine('line-long', 1200, 1100);
      assert.ok(recorded >= 1100, `recorded ${recorded}`);
      const snapshot = await waypoint.store.getOperation(resumeBaseKey('line-long'));
      assert.ok(snapshot?.result, 'the executor kept a resume snapshot');
      // A line of 50-step agents: its completed steps and its folded agents are one entry each, whatever the run's length.
      const payload = JSON.parse((JSON.parse(snapshot.result) as { output: string }).output) as { completedRuns: unknown[]; flow: { doneKeys: unknown[]; doneKeyRuns: unknown[] } };
      assert.equal(payload.completedRuns.length, 1, JSON.stringify(payload.completedRuns));
      assert.deepEqual([payload.flow.doneKeys, payload.flow.doneKeyRuns.length], [[], 1]);
      const { result, rowsRead } = await resumeCounting('line-long', hook);
      assert.equal(result.status, 'completed');
      assert.equal(result.stepsExecuted, 1200 - recorded);
      // Every row would be 2 x 1,100 (the integrity check and the restore each read them): the tail since the snapshot is under 2 x RESUME_BASE_EVERY.
      assert.ok(rowsRead <= 2 * RESUME_BASE_EVERY, `resume read ${rowsRead} rows of ${recorded}`);
      const uninterrupted = await waypoint.run(pipeline, { runId: 'line-long-ref', input: {} });
      assert.deepEqual(result.state, uninterrupted.state);
    });

    it('a paused loop of 1,100 rows (steps and decisions) resumes from its snapshot to the uninterrupted state', async () => {
      const stop = new AbortController();
      loopHooks.onTick = (at) => {
        if (at >= 550) stop.abort('test: pause');
      };
      const first = await waypoint.run(SnapshotLoop, { runId: 'loop-long', input: { subject: 's' }, signal: stop.signal });
      assert.equal(first.status, 'paused');
      const recorded = (await waypoint.store.getRun('loop-long'))!.lastSequence;
      assert.ok(recorded >= 1000, `recorded ${recorded}`);
      let rowsAtFirst: number | null = null;
      loopHooks.onTick = () => {
        rowsAtFirst ??= counter.rows;
      };
      counter.rows = 0;
      counter.counting = true;
      const result = await waypoint.resume('loop-long').finally(() => {
        counter.counting = false;
        loopHooks.onTick = undefined;
      });
      assert.equal(result.status, 'completed');
      assert.ok(rowsAtFirst !== null && rowsAtFirst <= 2 * RESUME_BASE_EVERY, `resume read ${rowsAtFirst} rows of ${recorded}`);
      const uninterrupted = await waypoint.run(SnapshotLoop, { runId: 'loop-long-ref', input: { subject: 's' } });
      assert.deepEqual(result.state, uninterrupted.state);
      assert.equal((result.state as unknown as LoopState).at, LOOP_ITERATIONS);
    });

    it('at 5,000 recorded steps a resume reads the same short tail: a straight line and a loop, to their uninterrupted states', async () => {
      const { pipeline, hook, recorded } = await pausedLine('line-5k', 5010, 5000);
      assert.ok(recorded >= 5000, `recorded ${recorded}`);
      const line = await resumeCounting('line-5k', hook);
      assert.equal(line.result.status, 'completed');
      assert.equal(line.result.stepsExecuted, 5010 - recorded);
      // Every row again would be 5,000 or more (10,000 when checked and restored apart); see the loop below for the bound.
      assert.ok(line.rowsRead <= 3 * (RESUME_BASE_EVERY + 2), `line: resume read ${line.rowsRead} rows of ${recorded} before its first new step`);
      assert.deepEqual(line.result.state, (await waypoint.run(pipeline, { runId: 'line-5k-ref', input: {} })).state);

      const stop = new AbortController();
      loopHooks.onTick = (at) => {
        if (at >= 5000) stop.abort('test: pause');
      };
      assert.equal((await waypoint.run(LongSnapshotLoop, { runId: 'loop-5k', input: { subject: 's' }, signal: stop.signal })).status, 'paused');
      const paused = (await waypoint.store.getRun('loop-5k'))!;
      const loopRows = paused.lastSequence;
      // A run's result after a resume counts its progress from the snapshot and the tail: the same figures as from every row.
      const plan = readPlan(LongSnapshotLoop);
      counter.rows = 0;
      counter.counting = true;
      const fromSnapshot = await loadRunProgress(waypoint.store, paused, plan, {});
      counter.counting = false;
      assert.ok(counter.rows <= RESUME_BASE_EVERY + 2, `progress read ${counter.rows} rows of ${loopRows}`);
      assert.deepEqual(fromSnapshot, await loadRunProgress(waypoint.store, paused, plan));
      assert.equal(fromSnapshot.recorded, 5000);
      await viewsReadTheTail('loop-5k', plan, loopRows);
      let rowsAtFirst: number | null = null;
      loopHooks.onTick = () => {
        rowsAtFirst ??= counter.rows;
      };
      counter.rows = 0;
      counter.counting = true;
      const result = await waypoint.resume('loop-5k').finally(() => {
        counter.counting = false;
        loopHooks.onTick = undefined;
      });
      assert.equal(result.status, 'completed');
      assert.equal((result.state as unknown as LoopState).at, LONG_ITERATIONS, 'the iteration counter went on from 5,000, not from the snapshot or from 0');
      assert.equal(result.stepsExecuted, LONG_ITERATIONS - 5000);
      // The tail is read twice (the integrity check before the lease, the restore under it), and a snapshot that
      // comes due at the first boundary reads it once more: every row would be 10,000 (20,000 checked and restored apart).
      assert.ok(rowsAtFirst !== null && rowsAtFirst <= 3 * (RESUME_BASE_EVERY + 2), `loop: resume read ${rowsAtFirst} rows of ${loopRows} before its first new step`);
      // The whole call, its result's progress included, reads a bounded number of rows too (every row would be 10,000 more).
      assert.ok(counter.rows <= 4 * (RESUME_BASE_EVERY + 2), `loop: the resume call read ${counter.rows} rows of ${loopRows}`);
      assert.deepEqual(result.progress, await loadRunProgress(waypoint.store, (await waypoint.store.getRun('loop-5k'))!, plan));
    });

    it('a run without a snapshot (as an earlier release recorded it) resumes from every row to the uninterrupted state', async () => {
      const { pipeline, hook, recorded } = await pausedLine('line-old', 700, 650);
      const run = (await waypoint.store.getRun('line-old'))!;
      // What an earlier release left: rows only (the snapshot record emptied under the run's own fence).
      await waypoint.store.writeOperation(
        { operationKey: resumeBaseKey('line-old'), runId: 'line-old', stepKey: 'x', name: '$waypoint.resume-base', state: 'started', result: null, error: null, attempts: 1 },
        { fence: { epoch: run.leaseEpoch } },
      );
      const { result, rowsRead } = await resumeCounting('line-old', hook);
      assert.equal(result.status, 'completed');
      assert.equal(result.stepsExecuted, 700 - recorded);
      assert.ok(rowsRead >= recorded, `with no snapshot every row is read (${rowsRead} of ${recorded})`);
      assert.deepEqual(result.state, (await waypoint.run(pipeline, { runId: 'line-old-ref', input: {} })).state);
    });

    it('a snapshot that no longer fits the rows (altered) is ignored: the resume reads every row and ends right', async () => {
      const { pipeline, hook, recorded } = await pausedLine('line-stale', 700, 650);
      const run = (await waypoint.store.getRun('line-stale'))!;
      const op = (await waypoint.store.getOperation(resumeBaseKey('line-stale')))!;
      const base = JSON.parse(op.result!) as { output: string };
      base.output = base.output.replace('"value"', '"valuX"');
      await waypoint.store.writeOperation({ ...op, result: JSON.stringify(base) }, { fence: { epoch: run.leaseEpoch } });
      const { result, rowsRead } = await resumeCounting('line-stale', hook);
      assert.equal(result.status, 'completed');
      assert.ok(rowsRead >= recorded, `an altered snapshot is not used (${rowsRead} rows read of ${recorded})`);
      assert.deepEqual(result.state, (await waypoint.run(pipeline, { runId: 'line-stale-ref', input: {} })).state);
    });
  });
}
