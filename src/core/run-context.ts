import { AsyncLocalStorage } from 'node:async_hooks';
import type { CheckpointStore, Fence } from '../storage/checkpoint-store';
import type { Clock } from './clock';
import type { Logger } from './logger';
import type { Telemetry } from './telemetry';

/** What the runtime knows about the step that is executing, carried through async calls. */
export interface ActiveStep {
  runId: string;
  agentId: string;
  stepName: string;
  /** `agentId/stepName`. */
  stepKey: string;
  attempt: number;
  signal: AbortSignal;
  fence: Fence;
  store: CheckpointStore;
  logger: Logger;
  clock: Clock;
  telemetry: Telemetry;
  /** Calls per operation name in this attempt: the ordinal that makes two calls' keys differ. */
  ordinals: Map<string, number>;
  /** Operation keys committed by this step (recorded or reused), for `side_effects_committed`. */
  committed: string[];
  /** Set while a side effect runs, so nested side effects are part of the outer one. */
  operation?: ActiveOperation;
}

/** The side-effect call in progress, as seen from inside the effect. */
export interface ActiveOperation {
  /** Deterministic idempotency key: pass it to the external system (an Idempotency-Key header). */
  key: string;
  name: string;
  runId: string;
  stepKey: string;
  /** How many times this operation has been started, this call included. */
  attempt: number;
}

export const stepStorage = new AsyncLocalStorage<ActiveStep>();

/** The step currently executing in this async context, if any. */
export function currentStep(): ActiveStep | undefined {
  return stepStorage.getStore();
}

/**
 * The side effect currently executing, with its idempotency key.
 * Throws when called outside a `@SideEffect` method (or `guardedExecute`).
 *
 * @example
 * @SideEffect() async charge(amount: number) {
 *   await payments.charge({ amount }, { idempotencyKey: currentOperation().key });
 * }
 */
export function currentOperation(): ActiveOperation {
  const op = stepStorage.getStore()?.operation;
  if (!op) throw new Error('currentOperation() was called outside a side effect: call it from a @SideEffect method or a guardedExecute callback.');
  return op;
}
