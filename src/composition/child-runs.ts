import { appendCancelled } from '../core/stream/run-stream-writer';
import type { RunRecord, RunStatus } from '../contract/checkpoint-store';
import { WaypointError, isWaypointErrorCode } from '../contract/errors';
import { restoreRun } from '../core/history/checkpoint-manager';
import type { ChildRunner, ItemChildRunner } from '../core/run/execution';
import { childEnded, FAN_OUT_MARK, FAN_OUT_REDRIVE_MARK, isItemPlan, itemChanges, type FanOutMeta, type FanOutOutcome, type FanOutRunner } from '../core/flow/fan-out';
import { verifySteps } from '../core/history/row-integrity';
import { faultPoint } from '../core/step/fault-points';
import { FLEET, type FleetHost } from '../core/run/fleet-port';
import { itemError } from '../core/flow/flow-executor';
import type { Logger } from '../contract/logger';
import type { PipelinePlan } from '../core/plan/plan-reader';
import type { RunDriver } from '../core/run/run-driver';
import type { RunFleet } from '../core/run/run-options';
import { resumeHintFor } from '../core/run/run-status';
import { serialize } from '../core/state/serializer';
import { deserialize } from '../core/state/value-decoder';
import { describeValue } from '../core/flow/flow-scope';

/**
 * Child runs of a `forEach` over a `@Pipeline` class, for the composition root (./waypoint.ts): run in
 * this process under their own lease, or queued for the fleet one per item (a distributed forEach, see
 * core/flow/fan-out.ts), read back into their parent, cancelled with it.
 */
/** What child runs need of the Waypoint: its store and container, and `prepare` with a parent run id. */
export interface ChildRunsHost extends FleetHost {
  prepare(
    pipeline: PipelinePlan['pipeline'],
    options: { runId: string; input?: unknown; parentRunId?: string },
    metadata?: Record<string, string>,
  ): ReturnType<FleetHost['prepare']>;
}

export class ChildRuns {
  constructor(
    private readonly host: ChildRunsHost,
    private readonly driver: RunDriver,
    private readonly logger: Logger,
    private readonly integrity: { hmacKey?: Buffer },
  ) {}

  /**
   * One child run of a parent's `forEach` over a `@Pipeline` class: created on first use (its parent and
   * item recorded with it), then run or resumed in this process under its own lease; a completed child
   * returns its recorded state without running anything.
   */
  async runChild(plan: PipelinePlan, spec: Parameters<ChildRunner>[1]): Promise<{ status: RunStatus; state: Record<string, unknown>; error?: unknown }> {
    const item = serialize(spec.item === undefined ? null : spec.item, { runId: spec.runId, what: `item ${spec.itemIndex} of parent '${spec.parentRunId}'` });
    const { run, created } = await this.host.prepare(
      plan.pipeline,
      { runId: spec.runId, input: spec.input, parentRunId: spec.parentRunId },
      { parentRunId: spec.parentRunId, itemIndex: String(spec.itemIndex), item },
    );
    // Closed with its parent when another item failed: the parent's resume runs it on (its completed steps stand).
    if (closedWithParent(run)) await this.reopen(run);
    // A collected failure stands: the parent resumed later reads it again instead of retrying the child.
    else if (spec.collect && (run.status === 'failed' || run.status === 'cancelled')) {
      return {
        status: run.status,
        state: {},
        error: run.error === null ? { code: run.status === 'cancelled' ? 'RUN_CANCELLED' : 'CHILD_RUN_FAILED', message: run.resumeHint ?? run.status } : deserialize(run.error),
      };
    }
    const current = closedWithParent(run) ? ((await this.host.store.getRun(run.runId)) ?? run) : run;
    const result = await this.driver.advance<Record<string, unknown>>(plan, current, { runId: spec.runId, signal: spec.signal }, created);
    return { status: result.status, state: result.state };
  }

  /**
   * An item of a distributed agent or sequence body when its parent runs without a fleet (resumed outside
   * it, say): when a fleet created the item's hidden child run, the item is that run, so what the fleet
   * already ran is not run again. A completed child runs nothing; an open one (queued, paused, its worker
   * gone) is run on in this process under its own lease; a failed or cancelled one fails the item as the
   * fleet's look at it would (one its parent's failure closed is reopened, as there). Null when the child
   * does not exist: the parent runs the item itself.
   */
  async itemChild(plan: PipelinePlan, spec: Parameters<ItemChildRunner>[1]): Promise<Awaited<ReturnType<ItemChildRunner>>> {
    let run = await this.host.store.getRun(spec.runId);
    if (!run) return null;
    if (closedWithParent(run)) {
      await this.reopen(run);
      run = (await this.host.store.getRun(run.runId)) ?? run;
    } else if (run.status === 'failed' || run.status === 'cancelled') {
      return { status: run.status, state: {}, error: childError(run) };
    }
    if (run.status !== 'completed') {
      const result = await this.driver.advance<Record<string, unknown>>(plan, run, { runId: spec.runId, signal: spec.signal });
      if (result.status !== 'completed') return { status: result.status, state: {} };
    }
    // What the fleet's parent reads: the item's merged step outputs, not the child's whole state.
    const state = await this.childState(plan, spec.runId);
    if (state === null) {
      throw new WaypointError(
        'ITEM_RUN_CHANGED',
        `Item run '${spec.runId}' completed, then was gone or no longer completed when its parent read it (deleted or changed meanwhile). Resume the parent again.`,
        { runId: spec.runId },
      );
    }
    return { status: 'completed', state };
  }

  /**
   * A child run cancelled by its parent's close policy (another item failed) becomes `paused` again, for the
   * parent's resume: the user fixed and retried the failed item, and the items the failure stopped carry on
   * from their last checkpoint. A run cancelled by anyone else stays cancelled.
   */
  private async reopen(child: RunRecord): Promise<void> {
    const resumeHint = `Reopened ${new Date().toISOString()} when its parent '${child.parentRunId ?? ''}' was resumed; it continues from its last checkpoint.`;
    // Unfenced: a cancelled run has no lease holder, and only its parent's execution (under the parent's lease) reopens it.
    await this.host.store.updateRun(child.runId, { status: 'paused', error: null, resumeHint }, null);
    this.logger.info('child run reopened for its resumed parent', { runId: child.runId, parentRunId: child.parentRunId });
  }

  /**
   * One look of a distributed forEach at its child runs (see fan-out.ts for the design): the states in
   * item order once every child has ended; else the children started up to `concurrency` open ones
   * (created with their parent and item, then queued; queueing is idempotent per child run id) and a wait.
   */
  async fanOut(plan: PipelinePlan, spec: Parameters<FanOutRunner>[1], fleet: RunFleet): Promise<FanOutOutcome> {
    const listed = new Map((await this.host.store.listRuns({ parentRunId: spec.parentRunId })).map((run) => [run.runId, run]));
    const children = spec.items.map((_, index) => listed.get(spec.runIdOf(index)));
    if (spec.onItemError === 'fail') {
      const failed = await this.failedItem(spec, children);
      if (failed) return failed;
    }
    // The parent resumed after an item failed: the children its failure closed carry on.
    for (const [index, child] of children.entries()) {
      if (child && closedWithParent(child)) {
        await this.reopen(child);
        children[index] = { ...child, status: 'paused', leaseOwner: null };
      }
    }
    if (children.every((child) => child !== undefined && childEnded(child))) {
      return { status: 'ended', results: await this.collect(plan, children as RunRecord[]), failed: null };
    }
    return this.queueChildren(plan, spec, fleet, children);
  }

  /**
   * Under `onItemError: 'fail'`, the first item whose child failed (or was cancelled by anyone but its
   * parent's close policy) ends the fan-out, after closing the children still open; null when there is none.
   */
  private async failedItem(spec: Parameters<FanOutRunner>[1], children: (RunRecord | undefined)[]): Promise<FanOutOutcome | null> {
    const index = children.findIndex((child) => child !== undefined && (child.status === 'failed' || (child.status === 'cancelled' && !closedWithParent(child))));
    if (index < 0) return null;
    const child = children[index]!;
    // Like a parent close policy: the children still queued or running are of no use to a failed parent.
    // They are marked so that the parent's resume (once the failed item is fixed) reopens them.
    for (const open of children) {
      if (open && !childEnded(open)) await this.cancelTree(open.runId, `item ${index} of '${spec.at}' in parent '${spec.parentRunId}' ${child.status} ${CLOSED_MARK}`);
    }
    const error = child.error === null ? new WaypointError('RUN_CANCELLED', `Child run '${child.runId}' was cancelled.`, { runId: child.runId }) : childError(child);
    return { status: 'ended', results: [], failed: { index, runId: child.runId, error } };
  }

  /** The results of a fan-out whose children have all ended, in item order: a completed child's state, else its item error. */
  private async collect(plan: PipelinePlan, children: readonly RunRecord[]): Promise<unknown[]> {
    // Read 16 at a time, each into its item's slot: the order is the items', not the reads'.
    const results: unknown[] = new Array(children.length);
    let read = 0;
    await inOrder(
      children.map((_, index) => index),
      16,
      async (index) => {
        const child = children[index];
        results[index] =
          child.status === 'completed' ? await this.childState(plan, child.runId) : itemError(childError(child), child.runId, child.status as 'failed' | 'cancelled', index);
        if (++read === 1) faultPoint('while-collecting-children');
      },
    );
    return results;
  }

  /**
   * A fan-out still open: creates and queues children up to `concurrency` open ones (and queues again those
   * a crash may have left unqueued), then says what the parent waits for. A queue outage is a wait too.
   */
  private async queueChildren(plan: PipelinePlan, spec: Parameters<FanOutRunner>[1], fleet: RunFleet, children: (RunRecord | undefined)[]): Promise<FanOutOutcome> {
    const { parentRunId, at, items, concurrency, onItemError } = spec;
    const meta: FanOutMeta = { at, items: items.length, concurrency, onItemError, ...(spec.state === undefined ? {} : { hidden: true }) };
    let open = children.filter((child) => child !== undefined && !childEnded(child)).length;
    // Queued before (a crash may have come between creating and queueing): sent again, a no-op when the job exists.
    const toSend: number[] = children.flatMap((child, index) => (child && (child.status === 'paused' || (child.status === 'running' && child.leaseOwner === null)) ? [index] : []));
    for (let index = 0; index < items.length && open < concurrency; index++) {
      if (children[index] === undefined) {
        toSend.push(index);
        open++;
      }
    }
    toSend.sort((a, b) => a - b);
    const { sent, outage } = await this.sendChildren(plan, spec, fleet, children, toSend, meta);
    const ended = children.filter((child) => child !== undefined && childEnded(child)).length;
    if (outage !== null) {
      // Not a failure of the parent: it waits, marked, and the orphan sweep of any worker queues it again once
      // the queue answers; that execution queues every child left unqueued (idempotent per child run id).
      this.logger.warn('run queue unavailable while queueing child runs; the parent waits and the orphan sweep re-drives it', {
        runId: parentRunId,
        at,
        queued: sent,
        of: toSend.length,
        error: outage instanceof Error ? outage.message : describeValue(outage),
      });
      return {
        status: 'waiting',
        detail: `for ${open} child runs of '${at}' on the fleet (${ended} of ${items.length} ended; the queue failed after ${sent} of ${toSend.length} sends, re-driven by the orphan sweep) ${FAN_OUT_MARK} ${FAN_OUT_REDRIVE_MARK}`,
      };
    }
    return { status: 'waiting', detail: `for ${open} child runs of '${at}' on the fleet (${ended} of ${items.length} ended) ${FAN_OUT_MARK}` };
  }

  /**
   * Creates (when missing) and queues the children at `toSend`, 16 at a time in item order. The first
   * QUEUE_UNAVAILABLE stops the sending and is returned as `outage`; any other error is thrown.
   */
  private async sendChildren(
    plan: PipelinePlan,
    spec: Parameters<FanOutRunner>[1],
    fleet: RunFleet,
    children: readonly (RunRecord | undefined)[],
    toSend: readonly number[],
    meta: FanOutMeta,
  ): Promise<{ sent: number; outage: unknown }> {
    let sent = 0;
    let outage: unknown = null;
    await inOrder(toSend, 16, async (index) => {
      // The queue is down: queue no more now; the children created so far wait `paused` for the re-drive.
      if (outage !== null) return;
      const runId = spec.runIdOf(index);
      if (children[index] === undefined) await this.createChild(plan, runId, spec.parentRunId, spec.items[index], index, meta, spec.state);
      try {
        await bounded(this.host.container.get(FLEET).enqueue(this.host, plan.pipeline, { runId, queue: fleet.queue, queueName: fleet.queueName }), SEND_TIMEOUT_MS, runId);
      } catch (error) {
        if (!(error instanceof WaypointError && error.code === 'QUEUE_UNAVAILABLE')) throw error;
        outage ??= error;
        return;
      }
      if (++sent < toSend.length) faultPoint('before-children-enqueued-all');
    });
    return { sent, outage };
  }

  /** A queued child run of a distributed forEach: created with its parent, item and fan-out, `paused` until a worker takes it. */
  private async createChild(
    plan: PipelinePlan,
    runId: string,
    parentRunId: string,
    item: unknown,
    itemIndex: number,
    meta: FanOutMeta,
    state: Record<string, unknown> | undefined,
  ): Promise<void> {
    const serialized = serialize(item === undefined ? null : item, { runId, what: `item ${itemIndex} of parent '${parentRunId}'` });
    // A @Pipeline child starts from its item; a distributed agent or sequence body from the parent's state at the forEach.
    const input = state ?? (isPlainObject(item) ? item : {});
    const { created } = await this.host.prepare(
      plan.pipeline,
      { runId, input, parentRunId },
      { parentRunId, itemIndex: String(itemIndex), item: serialized, fanOut: JSON.stringify(meta) },
    );
    if (created) {
      const resumeHint = `Queued for the fleet as item ${itemIndex} of '${meta.at}' in run '${parentRunId}'; a fleet worker will start it.`;
      // Unfenced: nobody holds a lease on a run created a moment ago.
      await this.host.store.updateRun(runId, { status: 'paused', resumeHint }, null);
    }
  }

  /** Cancels run `runId` and, below it, every child run that has not ended (a queued one never starts, a running one stops at its next write). */
  async cancelTree(runId: string, reason: string): Promise<void> {
    const run = await this.host.store.cancelRun(runId, resumeHintFor(runId, 'cancelled', `(${reason})`));
    if (run?.status === 'cancelled') {
      this.logger.info('run cancelled', { runId, pipeline: run.pipelineName, reason });
      await appendCancelled(this.host.store, runId, this.logger);
    }
    for (const child of await this.host.store.listRuns({ parentRunId: runId })) {
      if (!childEnded(child)) await this.cancelTree(child.runId, `parent '${runId}' cancelled`);
    }
  }

  /** A child run's final state for a read of its parent, or null while it has not completed. */
  async childState(plan: PipelinePlan, runId: string, collectIndex?: number): Promise<Record<string, unknown> | null> {
    const loaded = await this.host.store.loadRun(runId);
    if (isItemPlan(plan)) {
      // An item of a distributed agent or sequence body: its merged step outputs, as the in-process forEach gives them.
      if (!loaded || loaded.run.status !== 'completed') return null;
      verifySteps(loaded.run, loaded.steps, this.integrity);
      return itemChanges(runId, loaded.steps, plan.reducers);
    }
    if (loaded && collectIndex !== undefined && (loaded.run.status === 'failed' || loaded.run.status === 'cancelled')) {
      return itemError(childError(loaded.run), runId, loaded.run.status, collectIndex);
    }
    if (!loaded || loaded.run.status !== 'completed') return null;
    const restored = await restoreRun(plan, loaded, this.integrity, { replay: true, childState: (p, id, c) => this.childState(p, id, c) });
    return { ...restored.state };
  }
}

/**
 * How long one child's send may take before the queue counts as unavailable: a BullMQ client holds
 * commands while Redis is unreachable instead of failing them (a send that completes later is harmless:
 * the job id is the child's).
 */
const SEND_TIMEOUT_MS = 5_000;

/** `promise`, or a `QUEUE_UNAVAILABLE` error after `ms` (the promise's own outcome is then ignored). */
function bounded<T>(promise: Promise<T>, ms: number, runId: string): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const timer = setTimeout(
      () => reject(new WaypointError('QUEUE_UNAVAILABLE', `Queueing child run '${runId}' took over ${ms} ms; the run queue counts as unavailable.`, { runId })),
      ms,
    );
    promise.then(
      (value) => (clearTimeout(timer), resolve(value)),
      (error: unknown) => (clearTimeout(timer), reject(error as Error)),
    );
  });
}

/** In the cancel reason of a child run closed because a sibling failed (its parent's resume reopens it). */
const CLOSED_MARK = '[closed with its parent]';

/** True for a child run cancelled by its parent's close policy (not by a user or a cancelled parent). */
function closedWithParent(run: RunRecord): boolean {
  return run.status === 'cancelled' && run.parentRunId != null && (run.resumeHint?.includes(CLOSED_MARK) ?? false);
}

/** A failed child's stored error, for its parent's ITEM_FAILED or a collected item (exported for its test). */
export function childError(child: RunRecord): unknown {
  if (child.error === null)
    return new WaypointError(child.status === 'cancelled' ? 'RUN_CANCELLED' : 'CHILD_RUN_FAILED', `Child run '${child.runId}' is ${child.status}.`, { runId: child.runId });
  const stored = deserialize<unknown>(child.error);
  if (stored && typeof stored === 'object' && 'message' in stored) {
    const { code, message } = stored as { code?: unknown; message: unknown };
    // A code that is not Waypoint's (a user's own, a driver's) stays readable as cause.code.
    if (isWaypointErrorCode(code)) return new WaypointError(code, String(message), { runId: child.runId });
    return new WaypointError('CHILD_RUN_FAILED', String(message), { runId: child.runId, cause: stored });
  }
  return stored;
}

function isPlainObject(value: unknown): value is Record<string, unknown> {
  if (value === null || typeof value !== 'object' || Array.isArray(value)) return false;
  const proto = Object.getPrototypeOf(value) as unknown;
  return proto === Object.prototype || proto === null;
}

/** Runs `task` over `indexes` with at most `width` at once, starting them in order. */
async function inOrder(indexes: readonly number[], width: number, task: (index: number) => Promise<void>): Promise<void> {
  let next = 0;
  const lane = async () => {
    while (next < indexes.length) await task(indexes[next++]);
  };
  await Promise.all(Array.from({ length: Math.min(width, indexes.length) }, lane));
}
