import type { RetryPolicy, SideEffectOptions } from '../decorators/options';
import type { OperationRecord } from '../storage/checkpoint-store';
import { describeError, NonRetryableError, SideEffectFailedError, SideEffectOutsideRunError, WaypointError } from './errors';
import { faultPoint } from './fault-points';
import { resolveRetry } from './plan-reader';
import { backoffDelay } from './retry';
import { currentStep, stepStorage, type ActiveStep } from './run-context';
import { deserialize, serialize, sha256 } from './serializer';

/**
 * Deterministic key of one side-effect call: the same run, agent, step, operation name and call ordinal
 * give the same key in every process and on every resume; two calls in one step get different keys.
 */
export function operationKey(runId: string, agentId: string, stepName: string, operation: string, ordinal: number): string {
  return sha256(JSON.stringify(['op', runId, agentId, stepName, operation, ordinal]));
}

/** Idempotency key of a whole step (the step row's `idempotency_key`, `ctx.idempotencyKey`). */
export function stepIdempotencyKey(runId: string, agentId: string, stepName: string): string {
  return sha256(JSON.stringify(['step', runId, agentId, stepName]));
}

interface GuardedCall {
  key: string;
  name: string;
  options: SideEffectOptions;
  args: unknown[];
}

/** Entry point of every `@SideEffect` method call (installed by the decorator). */
export function interceptSideEffect(label: string, options: SideEffectOptions, invoke: () => unknown, args: unknown[]): Promise<unknown> {
  const step = currentStep();
  const name = options.name ?? label;
  if (!step) return Promise.reject(new SideEffectOutsideRunError(label, name));
  if (step.operation) return Promise.resolve(invoke()); // nested inside another effect: part of that one
  const ordinal = (step.ordinals.get(name) ?? 0) + 1;
  step.ordinals.set(name, ordinal);
  const key = operationKey(step.runId, step.agentId, step.stepName, name, ordinal);
  return runGuarded(step, { key, name, options, args }, invoke);
}

/**
 * Runs `fn` at most once to completion for `key` within the current step's run: a committed key returns
 * its recorded result without running. For code that does not use the `@SideEffect` decorator.
 *
 * @example
 * const receipt = await guardedExecute(`charge:${orderId}`, () => stripe.charge(order));
 */
export function guardedExecute<T>(key: string, fn: () => T | Promise<T>, options: Omit<SideEffectOptions, 'name'> & { name?: string } = {}): Promise<T> {
  const step = currentStep();
  const name = options.name ?? key;
  if (!step) return Promise.reject(new SideEffectOutsideRunError('guardedExecute', name));
  if (step.operation) return Promise.resolve(fn());
  const fullKey = sha256(JSON.stringify(['key', step.runId, key]));
  return runGuarded(step, { key: fullKey, name, options, args: [] }, fn) as Promise<T>;
}

async function runGuarded(step: ActiveStep, call: GuardedCall, invoke: () => unknown): Promise<unknown> {
  const { store, fence, runId, stepKey, logger } = step;
  const fields = { runId, step: stepKey, operation: call.name, key: call.key };
  const prior = await store.getOperation(call.key);
  const report = (outcome: 'executed' | 'reused' | 'reconciled' | 'failed') => step.telemetry.sideEffect({ runId, step: stepKey, operation: call.name, outcome });
  if (prior?.state === 'committed') {
    step.committed.push(call.key);
    report('reused');
    logger.info('side effect already committed; returning recorded result', fields);
    return decodeResult(prior);
  }
  if (prior?.state === 'started' && call.options.reconcile) {
    const outcome = await call.options.reconcile({ runId, operation: call.name, key: call.key, args: call.args });
    if (outcome.happened) {
      const text = serialize(outcome.result, { runId, step: stepKey, what: `reconciled result of side effect '${call.name}'` });
      await store.finishOperation(call.key, { state: 'committed', result: text }, { ...fence, runId });
      step.committed.push(call.key);
      report('reconciled');
      logger.info('side effect reconciled as done', fields);
      return deserialize(text);
    }
    logger.info('side effect reconciled as not done; running it', fields);
  }
  const policy = resolveRetry(call.options.retries as number | RetryPolicy | undefined);
  for (let attempt = 1; ; attempt++) {
    const record = await store.beginOperation({ operationKey: call.key, runId, stepKey, name: call.name }, fence);
    if (record.state === 'committed') {
      step.committed.push(call.key);
      report('reused');
      return decodeResult(record);
    }
    faultPoint('before-effect');
    let result: unknown;
    try {
      const op = { key: call.key, name: call.name, runId, stepKey, attempt: record.attempts };
      result = await step.telemetry.span('waypoint.side_effect', { 'waypoint.run_id': runId, 'waypoint.operation': call.name, 'waypoint.attempt': record.attempts }, () =>
        stepStorage.run({ ...step, operation: op }, () => Promise.resolve(invoke())),
      );
    } catch (error) {
      await store.finishOperation(call.key, { state: 'failed', error: describeError(error) }, { ...fence, runId });
      report('failed');
      const retryable = !(error instanceof NonRetryableError) && !(error instanceof WaypointError && error.code === 'LEASE_LOST') && (policy.retryOn?.(error) ?? true);
      if (!retryable || attempt >= policy.maxAttempts || step.signal.aborted) {
        throw new SideEffectFailedError(runId, stepKey, call.name, call.key, error);
      }
      logger.warn('side effect failed; retrying', { ...fields, attempt, error: describeError(error) });
      await step.clock.sleep(backoffDelay(policy, attempt), step.signal);
      continue;
    }
    faultPoint('after-effect-before-record');
    // Serialize before marking committed: an unstorable result leaves the operation 'started' (outcome
    // unknown), so a resume reconciles or repeats it with the same key rather than trusting a lost result.
    const text = serialize(result, { runId, step: stepKey, what: `result of side effect '${call.name}'` });
    await store.finishOperation(call.key, { state: 'committed', result: text }, { ...fence, runId });
    step.committed.push(call.key);
    report('executed');
    logger.debug('side effect committed', fields);
    return result;
  }
}

function decodeResult(record: OperationRecord): unknown {
  return record.result === null ? undefined : deserialize(record.result);
}
