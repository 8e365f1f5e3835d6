import type { LoadedRun, StepRecord } from '../../contract/checkpoint-store';
import { replayFlow, restoreRun } from './checkpoint-manager';
import type { BoundarySnapshot, ChildStateReader, RootBoundary } from '../flow/flow-executor';
import type { BasePayload, FlowBase, FlowStart } from '../run/execution';
import type { PipelinePlan } from '../plan/plan-types';
import { linkOf, SYSTEM_AGENT, type Integrity } from './row-integrity';
import { baseOf } from './flow-base';
import { appendPaths, compressPaths, PathSet, type PathEntry } from './path-runs';

/** A base snapshot at a top-level boundary: what it holds, and the rows it stands for. */
export interface BoundaryBase {
  /** The base's payload but its completed paths, which are `completed`. */
  payload: Omit<BasePayload, 'completed' | 'completedRuns'>;
  /** The paths the base folded, in order, compact (`expandPaths` lists them). */
  completed: PathEntry[];
  memories: Map<string, string>;
  /** The rows the base stands for (from the run's first row, or its earlier base row), in order. */
  folded: StepRecord[];
  /** The base row `loaded` started with, if any (a retention base or a resume snapshot). */
  previous: StepRecord | undefined;
}

/**
 * The base snapshot at the latest top-level boundary whose rows are exactly a prefix of `loaded`'s rows,
 * ending at or before sequence `limit`: after a whole entry of the pipeline's top level, between two steps
 * of a top-level agent, or after an iteration of a top-level loop, where nothing before is in flight.
 * Null when no such boundary exists. A first replay chooses the boundary; a second stops there and takes
 * its snapshot (the state's top-level keys, not a copy of the state: see FlowReplay), so it costs about two
 * replays of `loaded`'s rows and no copy of the state per boundary. `loaded` may start with a base row (a
 * retention base, a resume snapshot): its rows are then the base and those after it, which is what keeps a
 * snapshot taken every N rows at O(N) rows of work. The caller has checked `loaded`'s rows
 * (`verifySteps`): the replays do not check them again.
 */
export async function baseAtBoundary(plan: PipelinePlan, loaded: LoadedRun, limit: number, integrity: Integrity, childState?: ChildStateReader): Promise<BoundaryBase | null> {
  const { run, steps } = loaded;
  const previous = steps[0]?.agentId === SYSTEM_AGENT && steps[0].stepName === 'base' ? steps[0] : undefined;
  const offset = previous ? 1 : 0;
  let chosen: { index: number; count: number } | undefined;
  let index = 0;
  await replay(plan, loaded, integrity, childState, (boundary) => {
    const rows = boundary.consumed.size - (previous && boundary.consumed.has(previous.sequence) ? 1 : 0);
    // The rows taken are exactly the oldest ones after the previous base: their highest sequence is the n-th row's.
    const prefix = rows > 0 && boundary.lastConsumed <= limit && steps[offset + rows - 1]?.sequence === boundary.lastConsumed;
    if (prefix && (!chosen || offset + rows > chosen.count)) chosen = { index, count: offset + rows };
    index += 1;
  });
  if (!chosen) return null;
  const at = chosen.index;
  let boundary: (FlowStart & BoundarySnapshot) | undefined;
  index = 0;
  await replay(plan, loaded, integrity, childState, (b) => {
    if (index++ !== at) return;
    const { done, doneKeys, iterations, steps: agentSteps } = b;
    const snapshot = b.snapshot();
    boundary = { done, doneKeys, iterations, steps: agentSteps, state: snapshot.state, memories: snapshot.memories, taken: snapshot.taken, completed: snapshot.completed };
    throw STOP; // nothing after the boundary is needed
  });
  const folded = steps.slice(0, chosen.count);
  const last = folded[folded.length - 1];
  // What an earlier base carried and the replay did not take before this boundary is carried on.
  const before = previous ? baseOf(previous) : undefined;
  const carried = (before?.payload.flow?.carried ?? []).filter((entry) => !boundary!.taken.has(entry.path));
  const flow: FlowBase = { done: boundary!.done, doneKeys: boundary!.doneKeys, carried };
  if (boundary!.iterations !== undefined) flow.iterations = boundary!.iterations;
  if (boundary!.steps !== undefined) flow.steps = boundary!.steps;
  // The earlier base's paths as it kept them (a snapshot's few entries; a retention base's list, in runs), then the paths completed since.
  const earlier = before ? [...compressPaths(before.payload.completed), ...(before.payload.completedRuns ?? [])] : [];
  const known = new PathSet(earlier);
  const added = boundary!.completed.filter((path) => !known.has(path) && Boolean(known.add(path)));
  const payload = { state: boundary!.state, version: run.pipelineVersion, replaces: linkOf(last), flow };
  return { payload, completed: appendPaths(earlier, added), memories: boundary!.memories, folded, previous };
}

async function replay(
  plan: PipelinePlan,
  loaded: LoadedRun,
  integrity: Integrity,
  childState: ChildStateReader | undefined,
  onBoundary: (boundary: RootBoundary) => void,
): Promise<void> {
  const restored = await restoreRun(plan, loaded, integrity, { verified: true });
  try {
    await replayFlow(plan, loaded.run, restored, childState, onBoundary);
  } catch (error) {
    if (error !== STOP) throw error;
  }
}

/** Thrown by a boundary callback to end a replay there. */
// plain Error: thrown and caught in this module only, never seen by a user.
const STOP = new Error('replay stopped at the chosen boundary');
