import 'reflect-metadata';
import { strict as assert } from 'node:assert';
import { after, before, describe, it } from 'node:test';
import { IsInt, IsOptional, IsString } from 'class-validator';
import { Agent, forEach, loop, memoryStorage, Pipeline, readPlan, Step, SystemClock, Waypoint, type StepContext } from '../../src/index';
import { loadRunProgress } from '../../src/core/history/progress-reads';
import { resumeBaseKey, takeResumeBase } from '../../src/core/history/resume-base';
import { runIdentity, systemRow } from '../../src/core/history/row-integrity';
import type { StepRecord } from '../../src/contract/records';
import type { ChildRuns } from '../../src/composition/child-runs';
import { countRows } from '../helpers/count-rows';

/*
 * Progress of a pipeline with forEach constructs counted from a resume snapshot (issue 40): the snapshot
 * folds the item-list decisions, so it carries the items of the lists it folded (`items`), and the figure
 * from it and the rows after it is the figure from every row: a top-level forEach over an agent, one over a
 * @Pipeline (child runs) and one inside each loop iteration, across two snapshots (the second carries the
 * first's items on). A snapshot written before snapshots carried items is read, and the figure comes from
 * every row.
 */

class ItemState {
  @IsString() subject!: string;
  @IsOptional() @IsInt() at?: number;
  @IsOptional() files?: string[];
  @IsOptional() customers?: string[];
  @IsOptional() reviews?: unknown[];
  @IsOptional() reports?: unknown[];
  @IsOptional() parts?: unknown[];
}

const hooks: { onTick?: (at: number) => void } = {};

class Reviewer extends Agent {
  @Step() review(ctx: StepContext<ItemState>) {
    return { file: ctx.item };
  }
}

class ReportState {
  @IsOptional() report?: string;
}

class Reporter extends Agent {
  @Step() report(ctx: StepContext<ReportState>) {
    return { report: `report ${String(ctx.item)}` };
  }
}

@Pipeline({ name: 'snapshot-items-report', version: '1', state: ReportState, agents: [Reporter] })
class Report {}

class Tick extends Agent {
  @Step() tick(ctx: StepContext<ItemState>) {
    const at = (ctx.state.at ?? 0) + 1;
    hooks.onTick?.(at);
    return { at };
  }
}

class Part extends Agent {
  @Step() check(ctx: StepContext<ItemState>) {
    return { part: ctx.item };
  }
}

@Pipeline({
  name: 'snapshot-items',
  version: '1',
  state: ItemState,
  agents: [
    forEach((s: ItemState) => s.files ?? [], Reviewer, { into: 'reviews', concurrency: 2 }),
    forEach((s: ItemState) => s.customers ?? [], Report, { into: 'reports' }),
    loop<ItemState>(
      { until: (s) => (s.at ?? 0) >= 30, maxIterations: 100 },
      Tick,
      forEach(() => ['a', 'b'], Part, { into: 'parts' }),
    ),
  ],
})
class Items {}

describe('progress of a forEach pipeline from a resume snapshot', () => {
  const plan = readPlan(Items);
  let waypoint: Waypoint;
  let counter: { rows: number; counting: boolean };
  before(async () => {
    waypoint = await Waypoint.create({ modules: [memoryStorage()], pipelines: [Items, Report] });
    counter = countRows(waypoint.store);
  });
  after(() => waypoint.close());

  /** Runs (or resumes) the run until iteration `pauseAt` ticks, then takes a resume snapshot at its latest boundary. */
  async function pauseAndSnapshot(runId: string, pauseAt: number) {
    const stop = new AbortController();
    hooks.onTick = (n) => n >= pauseAt && stop.abort('test: pause');
    const input = { subject: 's', files: ['f0', 'f1', 'f2'], customers: ['x', 'y'] };
    const result = await waypoint.run(Items, { runId, input, signal: stop.signal }).finally(() => (hooks.onTick = undefined));
    assert.equal(result.status, 'paused');
    const run = (await waypoint.store.getRun(runId))!;
    // The executor's reader of child runs' states: the forEach over a @Pipeline replays from its children.
    const { childRuns } = waypoint as unknown as { childRuns: ChildRuns };
    const parts = { store: waypoint.store, clock: new SystemClock(), integrity: {} };
    const at = await takeResumeBase(parts, plan, runId, { epoch: run.leaseEpoch }, (p, id, c) => childRuns.childState(p, id, c));
    assert.ok(at !== null, 'a snapshot was taken');
    return run;
  }

  /** The progress read with the snapshot, the rows it read, and the figure from every row. */
  async function readBoth(runId: string) {
    const run = (await waypoint.store.getRun(runId))!;
    counter.rows = 0;
    counter.counting = true;
    const fromSnapshot = await loadRunProgress(waypoint.store, run, plan, {}).finally(() => (counter.counting = false));
    return { fromSnapshot, rowsRead: counter.rows, everyRow: await loadRunProgress(waypoint.store, run, plan), rows: run.lastSequence };
  }

  /** Rewrites the run's snapshot as the code before `items` wrote it: the same row, sealed again, without the field. */
  async function dropItems(runId: string): Promise<void> {
    const run = (await waypoint.store.getRun(runId))!;
    const op = (await waypoint.store.getOperation(resumeBaseKey(runId)))!;
    const row = JSON.parse(op.result!) as StepRecord & { completedAt: string };
    const payload = JSON.parse(row.output) as Record<string, unknown>;
    assert.ok('items' in payload, 'the snapshot carries items');
    delete payload.items;
    const old = systemRow(runId, row.sequence, 'base', JSON.stringify(payload), row.memory, new Date(row.completedAt), {}, { identity: runIdentity(run), prev: '' });
    await waypoint.store.writeOperation({ ...op, result: JSON.stringify(old) }, { fence: { epoch: run.leaseEpoch } });
  }

  it('equals every row, items included, reading the tail only; a second snapshot carries the first one items on', async () => {
    await pauseAndSnapshot('items', 8);
    const first = await readBoth('items');
    assert.deepEqual(first.fromSnapshot, first.everyRow);
    assert.deepEqual(first.fromSnapshot.items, { done: 3 + 2 + 2 * 7, total: 3 + 2 + 2 * 7 }, 'the 7 whole iterations each listed 2 parts');
    assert.ok(first.rowsRead < 10, `read ${first.rowsRead} rows of ${first.rows}`);

    await pauseAndSnapshot('items', 20);
    const second = await readBoth('items');
    assert.deepEqual(second.fromSnapshot, second.everyRow);
    assert.deepEqual(second.fromSnapshot.items, { done: 3 + 2 + 2 * 19, total: 3 + 2 + 2 * 19 });
    assert.ok(second.rowsRead < 10, `read ${second.rowsRead} rows of ${second.rows}`);

    const result = await waypoint.resume('items');
    assert.equal(result.status, 'completed');
    assert.deepEqual(result.progress, await loadRunProgress(waypoint.store, (await waypoint.store.getRun('items'))!, plan));
    assert.deepEqual(result.progress.items, { done: 3 + 2 + 2 * 30, total: 3 + 2 + 2 * 30 });
  });

  it('a snapshot without items (as written before) is read with every row, and so is one taken on top of it', async () => {
    await pauseAndSnapshot('old-items', 8);
    await dropItems('old-items');
    const old = await readBoth('old-items');
    assert.deepEqual(old.fromSnapshot, old.everyRow);
    assert.ok(old.rowsRead >= old.rows - 1, `every row is read (${old.rowsRead} of ${old.rows})`);

    // The next snapshot is taken from the old one and its tail: it cannot know the old one's items either.
    await pauseAndSnapshot('old-items', 20);
    const next = await readBoth('old-items');
    assert.deepEqual(next.fromSnapshot, next.everyRow);
    assert.deepEqual(next.fromSnapshot.items, { done: 3 + 2 + 2 * 19, total: 3 + 2 + 2 * 19 });
    assert.ok(next.rowsRead >= next.rows - 1, `every row is read (${next.rowsRead} of ${next.rows})`);
  });
});
