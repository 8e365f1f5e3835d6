import type { RunRecord, RunStatus } from '../contract/checkpoint-store';
import { WaypointError } from '../contract/errors';
import { restoreRun } from '../core/checkpoint-manager';
import type { ChildRunner } from '../core/execution';
import { childEnded, FAN_OUT_MARK, isItemPlan, itemChanges, type FanOutMeta, type FanOutOutcome, type FanOutRunner } from '../core/fan-out';
import { verifySteps } from '../core/row-integrity';
import { faultPoint } from '../core/fault-points';
import { FLEET, type FleetHost } from '../core/fleet-port';
import { itemError } from '../core/flow-executor';
import type { Logger } from '../core/logger';
import type { PipelinePlan } from '../core/plan-reader';
import type { RunDriver, RunFleet } from '../core/run-driver';
import { resumeHintFor } from '../core/run-status';
import { deserialize, serialize } from '../core/serializer';

/**
 * Child runs of a `forEach` over a `@Pipeline` class, for the composition root (./waypoint.ts): run in
 * this process under their own lease, or queued for the fleet one per item (a distributed forEach, see
 * core/fan-out.ts), read back into their parent, cancelled with it.
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
    // A collected failure stands: the parent resumed later reads it again instead of retrying the child.
    if (spec.collect && (run.status === 'failed' || run.status === 'cancelled')) {
      return {
        status: run.status,
        state: {},
        error: run.error === null ? { code: run.status === 'cancelled' ? 'RUN_CANCELLED' : 'ERROR', message: run.resumeHint ?? run.status } : deserialize(run.error),
      };
    }
    const result = await this.driver.advance<Record<string, unknown>>(plan, run, { runId: spec.runId, signal: spec.signal }, created);
    return { status: result.status, state: result.state };
  }

  /**
   * One look of a distributed forEach at its child runs (see fan-out.ts for the design): the states in
   * item order once every child has ended; else the children started up to `concurrency` open ones
   * (created with their parent and item, then queued; queueing is idempotent per child run id) and a wait.
   */
  async fanOut(plan: PipelinePlan, spec: Parameters<FanOutRunner>[1], fleet: RunFleet): Promise<FanOutOutcome> {
    const { parentRunId, at, items, concurrency, onItemError } = spec;
    const listed = new Map((await this.host.store.listRuns({ parentRunId })).map((run) => [run.runId, run]));
    const children = items.map((_, index) => listed.get(spec.runIdOf(index)));
    if (onItemError === 'fail') {
      const index = children.findIndex((child) => child !== undefined && (child.status === 'failed' || child.status === 'cancelled'));
      if (index >= 0) {
        const child = children[index]!;
        // Like a parent close policy: the children still queued or running are of no use to a failed parent.
        for (const open of children) if (open && !childEnded(open)) await this.cancelTree(open.runId, `item ${index} of '${at}' in parent '${parentRunId}' ${child.status}`);
        const error = child.error === null ? new WaypointError('RUN_CANCELLED', `child run '${child.runId}' was cancelled`, { runId: child.runId }) : childError(child);
        return { status: 'ended', results: [], failed: { index, runId: child.runId, error } };
      }
    }
    if (children.every((child) => child !== undefined && childEnded(child))) {
      // Read 16 at a time, each into its item's slot: the order is the items', not the reads'.
      const results: unknown[] = new Array(items.length);
      let read = 0;
      await inOrder(
        items.map((_, index) => index),
        16,
        async (index) => {
          const child = children[index]!;
          results[index] =
            child.status === 'completed' ? await this.childState(plan, child.runId) : itemError(childError(child), child.runId, child.status as 'failed' | 'cancelled', index);
          if (++read === 1) faultPoint('while-collecting-children');
        },
      );
      return { status: 'ended', results, failed: null };
    }
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
    let sent = 0;
    await inOrder(toSend, 16, async (index) => {
      const runId = spec.runIdOf(index);
      if (children[index] === undefined) await this.createChild(plan, runId, parentRunId, items[index], index, meta, spec.state);
      await this.host.container.get(FLEET).enqueue(this.host, plan.pipeline, { runId, queue: fleet.queue, queueName: fleet.queueName });
      if (++sent < toSend.length) faultPoint('before-children-enqueued-all');
    });
    const ended = children.filter((child) => child !== undefined && childEnded(child)).length;
    return { status: 'waiting', detail: `for ${open} child runs of '${at}' on the fleet (${ended} of ${items.length} ended) ${FAN_OUT_MARK}` };
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
    if (run?.status === 'cancelled') this.logger.info('run cancelled', { runId, pipeline: run.pipelineName, reason });
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

/** A failed child's stored error, for its parent's ITEM_FAILED or a collected item. */
function childError(child: RunRecord): unknown {
  if (child.error === null)
    return new WaypointError(child.status === 'cancelled' ? 'RUN_CANCELLED' : 'ERROR', `child run '${child.runId}' ${child.status}`, { runId: child.runId });
  const stored = deserialize<unknown>(child.error);
  if (stored && typeof stored === 'object' && 'message' in stored) {
    const { code, message } = stored as { code?: unknown; message: unknown };
    return new WaypointError(typeof code === 'string' ? code : 'ERROR', String(message), { runId: child.runId });
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
