import 'reflect-metadata';
import { strict as assert } from 'node:assert';
import { after, before, describe, it } from 'node:test';
import { IsArray, IsOptional, IsString } from 'class-validator';
import { Agent, forEach, memoryStorage, Pipeline, Step, Waypoint, type StepContext } from '../../src/index';
import { RESUME_BASE_EVERY, resumeBaseKey } from '../../src/core/history/resume-base';

/*
 * A resume snapshot serves only a later resume: the executor takes none at the boundary after the run's last
 * top-level entry, where the run ends (a 1,000-item forEach spent a fifth of its run building one). A boundary
 * with work still after it keeps its snapshot.
 */

class ItemsState {
  @IsString() subject!: string;
  @IsOptional() @IsArray() items?: number[];
  @IsOptional() @IsArray() results?: unknown[];
  @IsOptional() @IsString() closing?: string;
}

class Worker extends Agent {
  @Step() work(ctx: StepContext<ItemsState>) {
    return { item: ctx.itemIndex };
  }
}

class Closer extends Agent {
  @Step() close() {
    return { closing: 'done' };
  }
}

const items = (s: ItemsState) => s.items ?? [];

@Pipeline({ name: 'snapshot-end-each', version: '1.0.0', state: ItemsState, agents: [forEach(items, Worker, { into: 'results', concurrency: 8 })] })
class EachOnly {}

@Pipeline({ name: 'snapshot-end-each-then', version: '1.0.0', state: ItemsState, agents: [forEach(items, Worker, { into: 'results', concurrency: 8 }), Closer] })
class EachThenClose {}

describe('resume snapshots where the run ends', () => {
  let waypoint: Waypoint;
  before(async () => {
    waypoint = await Waypoint.create({ modules: [memoryStorage()] });
  });
  after(() => waypoint.close());

  const input = () => ({ subject: 's', items: Array.from({ length: RESUME_BASE_EVERY + 20 }, (_, i) => i) });

  it('a forEach that is the last top-level entry ends the run with no snapshot written after it', async () => {
    const result = await waypoint.run(EachOnly, { runId: 'each-only', input: input() });
    assert.equal(result.status, 'completed');
    assert.ok(result.lastSequence > RESUME_BASE_EVERY, `recorded ${result.lastSequence} rows`);
    assert.equal(await waypoint.store.getOperation(resumeBaseKey('each-only')), null);
  });

  it('the same forEach with a step after it keeps its snapshot at the boundary between them', async () => {
    const result = await waypoint.run(EachThenClose, { runId: 'each-then', input: input() });
    assert.equal(result.status, 'completed');
    assert.equal(result.state.closing, 'done');
    const snapshot = await waypoint.store.getOperation(resumeBaseKey('each-then'));
    assert.ok(snapshot?.result, 'a snapshot was kept after the forEach');
  });
});
