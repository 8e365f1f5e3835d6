import { WaypointError } from '../../contract/errors';
import { ChildWaiting, Halted, isPlainObject, isRealFailure, itemError, type Halt, type Scope } from './flow-scope';
import { itemPlanOf } from './fan-out';
import { ItemFailedError } from './flow-errors';
import type { StateFrame } from '../state/state-frame';
import { validateUpdate } from '../state/state-schema';
import type { ForEachNode } from '../plan/flow-plan';
import { StepAbandoned, type LiveInput } from '../run/execution';

/*
 * The child runs a live execution starts for a forEach's items: a `@Pipeline` child run, or a distributed
 * item's hidden child run run in process. Both start only once the parent's rows before them are durable
 * (`rowsDurable`, 'async' durability), so a child never runs ahead of the record that led to it.
 */

/** A distributed item's hidden child run, run (or resumed, or read) in process; null when it does not exist. */
export async function itemChildRun(input: LiveInput, node: ForEachNode, runId: string, halt: Halt): Promise<Record<string, unknown> | null> {
  if (halt.halted || input.stop.aborted) throw new Halted();
  await input.rowsDurable?.();
  const result = await input.itemChild!(itemPlanOf(input.plan, node), { runId, signal: input.stop });
  if (result === null) return null;
  if (result.status === 'completed') return result.state;
  if (result.status === 'failed' || result.status === 'cancelled') throw result.error;
  if (result.status === 'waiting') throw new ChildWaiting(`item run '${runId}' is waiting${result.detail ? ` (${result.detail})` : ''}; resume this run after it ends`);
  throw new StepAbandoned(`item run '${runId}' ${result.status}`);
}

/** The child run of a forEach over a `@Pipeline` class for item `index`: its final state (or its error, collected). */
export async function childRun(input: LiveInput, node: ForEachNode, scope: Scope, at: string, item: unknown, index: number, halt: Halt): Promise<unknown> {
  // `<parent>/<into>/<index>`; inside another construct the scope is part of it, so two items of an
  // outer forEach (or two branches) never share a child: `<parent>/forEach(files)[3]/reports/0`.
  const runId = `${input.runId}/${scope.path}${node.into}/${index}`;
  if (halt.halted || input.stop.aborted) throw new Halted();
  if (!input.runChild)
    throw new WaypointError('CHILD_RUNS_UNAVAILABLE', `Run '${input.runId}': '${at}' runs child pipelines, which this executor cannot start.`, {
      runId: input.runId,
      step: at,
    });
  await input.rowsDurable?.();
  const spec = { runId, parentRunId: input.runId, input: isPlainObject(item) ? (item as Record<string, unknown>) : {}, item, itemIndex: index, signal: input.stop };
  let result;
  try {
    result = await input.runChild(node.child!, { ...spec, collect: node.onItemError === 'collect' });
  } catch (error) {
    // 'collect': the child's own failure (recorded with the child) becomes the item's result; the parent's lease loss stays the parent's.
    if (node.onItemError === 'collect' && isRealFailure(error) && !(error instanceof WaypointError && error.code === 'LEASE_LOST' && error.runId === input.runId)) {
      return itemError(error, runId, error instanceof WaypointError && error.code === 'RUN_CANCELLED' ? 'cancelled' : 'failed', index);
    }
    throw error;
  }
  if (result.status === 'completed') return result.state;
  if ((result.status === 'failed' || result.status === 'cancelled') && node.onItemError === 'collect') return itemError(result.error, runId, result.status, index);
  if (result.status === 'waiting') throw new ChildWaiting(`child run '${runId}' is waiting${result.detail ? ` (${result.detail})` : ''}; resume this run after it ends`);
  throw new StepAbandoned(`child run '${runId}' ${result.status}`);
}

/**
 * A forEach's items as child runs queued for the fleet (fan-out.ts), once the parent's rows before them are
 * durable: waits until they have ended and gives the construct's update, their states in item order.
 */
export async function fleetItems(input: LiveInput, node: ForEachNode, scope: Scope, frame: StateFrame, at: string, list: unknown[]): Promise<Record<string, unknown>> {
  await input.rowsDurable?.();
  const { runId } = input;
  const outcome = await input.fanOut!(node.child ?? itemPlanOf(input.plan, node), {
    parentRunId: runId,
    at,
    runIdOf: (index) => `${runId}/${scope.path}${node.into}/${index}`,
    items: list,
    concurrency: node.concurrency,
    onItemError: node.onItemError,
    // An agent or sequence body's items start from the state at the forEach, as in process.
    ...(node.child ? {} : { state: { ...frame.view } }),
  });
  if (outcome.status === 'waiting') throw new ChildWaiting(outcome.detail);
  if (outcome.failed) throw new ItemFailedError(runId, at, outcome.failed.index, outcome.failed.error);
  const update = { [node.into]: outcome.results };
  if (input.validateEveryStep) validateUpdate(input.plan.state, update, { runId, step: at, phase: 'collected by forEach' });
  return update;
}
