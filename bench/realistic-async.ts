import type { BenchEnvironment, BenchWaypoint } from './environment';
import type { Class, StepHooks } from './pipeline';
import { ratioSpread, us, usSpread, verdict, type Section } from './report';
import { pairedRatio, summarize, within } from './stats';

/**
 * Issue 40: the realistic group's PostgreSQL rows with `durability: 'async'` (a step's row is written while
 * the next step runs), measured in the same interleaved rounds as the floor and the 'sync' rows.
 */

type Shape = 'flat' | 'realistic';

/** Targets against the INSERT floor: flat 1 KB steps ≤ 1.10x, the realistic pipeline ≤ 1.15x. */
const TARGETS: Record<Shape, number> = { flat: 1.1, realistic: 1.15 };

/** The two 'async' measures (`flat async`, `realistic async`), on a Waypoint of their own. */
export async function asyncMeasures(
  env: BenchEnvironment,
  make: (shape: Shape, name: string, hooks: StepHooks) => Class,
  wallPerStep: (bw: BenchWaypoint, pipeline: Class, hooks: StepHooks) => Promise<number>,
): Promise<Record<string, () => Promise<number>>> {
  const bw = await env.waypoint('postgres', { name: 'real_async', options: { durability: 'async' } });
  const measures: Record<string, () => Promise<number>> = {};
  for (const shape of ['flat', 'realistic'] as const) {
    const hooks: StepHooks = {};
    const pipeline = make(shape, `real${shape}_async`, hooks);
    measures[`${shape} async`] = () => wallPerStep(bw, pipeline, hooks);
  }
  return measures;
}

/** Their rows, as ratios to the floor of the same rounds. */
export function asyncRows(cost: Section, samples: Record<string, number[]>, floorWhat: string): void {
  const floor = summarize(samples.floor);
  for (const shape of ['flat', 'realistic'] as const) {
    const wall = samples[`${shape} async`];
    const r = pairedRatio(wall, samples.floor);
    const v = within(r.median, TARGETS[shape]);
    cost.rows.push([`${shape}, durability 'async'`, 'postgres', usSpread(summarize(wall)), '', `${floorWhat} ${us(floor.median)}`, ratioSpread(r), verdict(v)]);
    cost.figures[`${shape}:postgres:async`] = { wallUs: summarize(wall), floorUs: floor, ratio: r, target: TARGETS[shape], met: v.met, missedBy: v.missedBy };
  }
}
