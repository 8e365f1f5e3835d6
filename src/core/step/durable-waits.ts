import { checkSignalName } from '../../contract/signal-rules';
import { WaypointError } from '../../contract/errors';
import { guardedExecute } from './idempotency-guard';
import type { ActiveStep } from './run-context';
import { stepStorage } from './run-context';
import { sha256 } from '../state/serializer';
import { deserialize } from '../state/value-decoder';

/** Thrown inside a step by `ctx.waitFor` when the awaited signal has not arrived: the run becomes `waiting`. */
export class WaitSuspended extends Error {
  constructor(
    readonly signalName: string,
    /** The path of the step that waits. */
    readonly step?: string,
  ) {
    super(`waiting for signal '${signalName}'`);
  }
}

/** Options of `ctx.waitFor`. */
export interface WaitOptions {
  /** Fail the step when the signal has not arrived this long after the wait first began (durable). */
  timeoutMs?: number;
  /** Keep the executor polling this long before suspending the run as `waiting`. Default 0. */
  holdMs?: number;
  /** Poll period while holding. Default 200 ms. */
  pollMs?: number;
}

/** Operation key under which `waypoint.signal(runId, name, payload)` records a signal. */
export function signalKey(runId: string, name: string): string {
  return sha256(JSON.stringify(['signal', runId, name]));
}

/**
 * `ctx.sleep(ms)`: the wake-up time is recorded as an operation the first time, so a restarted process
 * sleeps only what is left of it.
 */
export async function durableSleep(step: ActiveStep, ms: number): Promise<void> {
  if (!(Number.isFinite(ms) && ms >= 0))
    throw new WaypointError('INVALID_ARGUMENT', `ctx.sleep(ms) needs a non-negative number, got ${ms}.`, { runId: step.runId, step: step.stepKey });
  const key = callKey(step, 'sleep');
  const wakeAt = await stepStorage.run(step, () => guardedExecute(key, () => step.clock.now().getTime() + ms, { name: 'waypoint:sleep' }));
  const remaining = wakeAt - step.clock.now().getTime();
  if (remaining > 0) await step.clock.sleep(remaining, step.signal);
}

/**
 * `ctx.waitFor(name)`: returns the payload of signal `name` once delivered. Until then the run is
 * checkpointed as `waiting` and the executor returns (unless `holdMs` keeps it polling); resuming after
 * `waypoint.signal(...)` runs the step again and the wait returns the payload.
 */
export async function waitForSignal<T>(step: ActiveStep, name: string, options: WaitOptions = {}): Promise<T> {
  const where = { runId: step.runId, step: step.stepKey };
  // The same rule as waypoint.signal(): a name no signal can carry would leave the run waiting forever.
  checkSignalName(name, where);
  const key = callKey(step, `wait:${name}`);
  const since = await stepStorage.run(step, () => guardedExecute(key, () => step.clock.now().getTime(), { name: `waypoint:wait:${name}` }));
  const holdUntil = step.clock.now().getTime() + (options.holdMs ?? 0);
  for (;;) {
    const record = await step.store.getOperation(signalKey(step.runId, name));
    if (record?.state === 'committed') return (record.result === null ? undefined : deserialize(record.result)) as T;
    const now = step.clock.now().getTime();
    if (options.timeoutMs !== undefined && now - since >= options.timeoutMs) {
      throw new WaypointError(
        'WAIT_TIMEOUT',
        `Step '${step.stepKey}' of run '${step.runId}' waited ${options.timeoutMs} ms for signal '${name}', which never came. ` +
          `Send it with waypoint.signal('${step.runId}', '${name}', payload), then call waypoint.resume('${step.runId}') to run the step again; or give ctx.waitFor() a longer timeoutMs.`,
        where,
      );
    }
    if (now >= holdUntil) throw new WaitSuspended(name, step.stepKey);
    await step.clock.sleep(Math.min(options.pollMs ?? 200, holdUntil - now), step.signal);
  }
}

/**
 * Key of the nth `kind` call in this step: scoped to the step and numbered per attempt, so each call has
 * its own record and a re-run of the step (after a crash) finds the same records in the same order.
 */
function callKey(step: ActiveStep, kind: string): string {
  const ordinalName = `waypoint:${kind}`;
  const n = (step.ordinals.get(ordinalName) ?? 0) + 1;
  step.ordinals.set(ordinalName, n);
  return `waypoint:${kind}:${step.stepKey}#${n}`;
}
