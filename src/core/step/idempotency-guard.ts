import type { EntityManager } from 'typeorm';
import type { SideEffectOptions } from '../../decorators/options';
import type { OperationRecord } from '../../contract/checkpoint-store';
import { describeError, NonRetryableError, SideEffectFailedError, SideEffectOutsideRunError, WaypointError } from '../../contract/errors';
import { recordedOperation } from './recorded-operations';
import { effectBoundary } from './crash-points';
import { resolveRetry } from '../plan/plan-reader';
import { backoffDelay } from './retry';
import { currentStep, stepStorage, type ActiveStep } from './run-context';
import { serialize, sha256 } from '../state/serializer';
import { deserialize } from '../state/value-decoder';
import { EffectAfterTransactionError, TransactionScope } from './transaction-scope';
import { installSideEffectInterceptor } from '../../contract/side-effect-hook';

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
  if (step.operation) {
    // nested inside another effect: part of that one (a synchronous throw becomes its rejection, like any effect's)
    try {
      return Promise.resolve(invoke());
    } catch (error) {
      return Promise.reject(error);
    }
  }
  const ordinal = (step.ordinals.get(name) ?? 0) + 1;
  step.ordinals.set(name, ordinal);
  const key = operationKey(step.runId, step.agentId, step.path ?? step.stepName, name, ordinal);
  return dispatch(step, { key, name, options, args }, invoke);
}

installSideEffectInterceptor(interceptSideEffect);

/** Options of {@link guardedExecute}: those of `@SideEffect`, with the name optional (default: the key). */
export type GuardedOptions = Omit<SideEffectOptions, 'name'> & { name?: string };

/**
 * The plain-function form of `@SideEffect`, for code that does not use decorators: runs `fn` at most
 * once to completion for `key` within the current run. A committed key returns its recorded result
 * without running; an operation whose outcome was not recorded (a crash in between) calls
 * `options.reconcile`, or runs `fn` again with the same idempotency key (`currentOperation().key`).
 * With `{ transactional: true }` it runs inside the step's transaction (`currentTransaction()`) and
 * commits exactly once with the step. Must be called inside a running step (else
 * `SideEffectOutsideRunError`); the same `key` in two steps of one run is one operation.
 *
 * @example
 * const receipt = await guardedExecute(`charge:${orderId}`, () =>
 *   stripe.charges.create({ amount }, { idempotencyKey: currentOperation().key }), { retries: 2 });
 */
export function guardedExecute<T>(key: string, fn: () => T | Promise<T>, options: GuardedOptions = {}): Promise<T> {
  const step = currentStep();
  const name = options.name ?? key;
  if (!step) return Promise.reject(new SideEffectOutsideRunError('guardedExecute', name));
  if (step.operation) return Promise.resolve(fn());
  const fullKey = sha256(JSON.stringify(['key', step.runId, key]));
  return dispatch(step, { key: fullKey, name, options, args: [] }, fn) as Promise<T>;
}

function dispatch(step: ActiveStep, call: GuardedCall, invoke: () => unknown): Promise<unknown> {
  // 'async' durability: an effect (its intent row, a durable call, a wait, a sleep) never runs ahead of the rows before it.
  if (step.rowsDurable) return step.rowsDurable().then(() => dispatchNow(step, call, invoke));
  return dispatchNow(step, call, invoke);
}

function dispatchNow(step: ActiveStep, call: GuardedCall, invoke: () => unknown): Promise<unknown> {
  return call.options.transactional === true ? runInTransaction(step, call, invoke) : runGuarded(step, call, invoke);
}

async function runGuarded(step: ActiveStep, call: GuardedCall, invoke: () => unknown): Promise<unknown> {
  const { store, fence, runId, stepKey, logger } = step;
  if (step.transaction && !(await step.transaction.allowsOutsideWrites())) throw new EffectAfterTransactionError(runId, stepKey, call.name, store.backend);
  const fields = { runId, step: stepKey, operation: call.name, key: call.key };
  const prior = await recordedOperation(step, call.key);
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
  const policy = resolveRetry(call.options.retries);
  for (let attempt = 1; ; attempt++) {
    const record = await store.beginOperation({ operationKey: call.key, runId, stepKey, name: call.name }, fence);
    if (record.state === 'committed') {
      step.committed.push(call.key);
      report('reused');
      return decodeResult(record);
    }
    effectBoundary('before-effect', 'before-effect', step, call, false);
    let result: unknown;
    try {
      const op = { key: call.key, name: call.name, runId, stepKey, attempt: record.attempts };
      result = await step.telemetry.span('waypoint.side_effect', { 'waypoint.run_id': runId, 'waypoint.operation': call.name, 'waypoint.attempt': record.attempts }, () =>
        stepStorage.run({ ...step, operation: op }, () => Promise.resolve(invoke())),
      );
    } catch (error) {
      await store.finishOperation(call.key, { state: 'failed', error: describeError(error) }, { ...fence, runId });
      report('failed');
      if (!isRetryableEffectError(error, policy.retryOn) || attempt >= policy.maxAttempts || step.signal.aborted) {
        throw new SideEffectFailedError(runId, stepKey, call.name, call.key, error);
      }
      logger.warn('side effect failed; retrying', { ...fields, attempt, error: describeError(error) });
      await step.clock.sleep(backoffDelay(policy, attempt), step.signal);
      continue;
    }
    effectBoundary('after-effect-before-record', 'after-effect', step, call, false);
    // Serialize before marking committed: an unstorable result leaves the operation 'started' (outcome
    // unknown), so a resume reconciles or repeats it with the same key rather than trusting a lost result.
    const text = serialize(result, { runId, step: stepKey, what: `result of side effect '${call.name}'` });
    await store.finishOperation(call.key, { state: 'committed', result: text }, { ...fence, runId });
    step.committed.push(call.key);
    report('executed');
    effectBoundary(null, 'effect-recorded', step, call, false);
    logger.debug('side effect committed', fields);
    return result;
  }
}

/**
 * The exactly-once path: the effect runs inside the step's transaction, within a savepoint; its result is
 * recorded committed in the same transaction, which commits with the step's checkpoint. A crash anywhere
 * before that COMMIT discards the effect's writes with its record, so the outcome is never unknown and no
 * reconcile hook is needed. A failed attempt is rolled back to its savepoint and recorded failed.
 */
function runInTransaction(step: ActiveStep, call: GuardedCall, invoke: () => unknown): Promise<unknown> {
  const { runId, stepKey } = step;
  const scope = (step.transaction ??= new TransactionScope(step));
  const report = (outcome: 'executed' | 'reused' | 'failed') => step.telemetry.sideEffect({ runId, step: stepKey, operation: call.name, outcome });
  const op = { operationKey: call.key, runId, stepKey, name: call.name };
  return scope.run(call.name, async (tx) => {
    const prior = await tx.getOperation(call.key);
    if (prior?.state === 'committed') {
      step.committed.push(call.key);
      report('reused');
      return decodeResult(prior);
    }
    const policy = resolveRetry(call.options.retries);
    for (let attempt = 1; ; attempt++) {
      await tx.savepoint();
      effectBoundary('before-effect', 'before-effect', step, call, true);
      let result: unknown;
      try {
        const active = { key: call.key, name: call.name, runId, stepKey, attempt: (prior?.attempts ?? 0) + attempt, transaction: tx.manager as EntityManager };
        result = await step.telemetry.span('waypoint.side_effect', { 'waypoint.run_id': runId, 'waypoint.operation': call.name, 'waypoint.attempt': active.attempt }, () =>
          stepStorage.run({ ...step, operation: active }, () => Promise.resolve(invoke())),
        );
      } catch (error) {
        await tx.rollbackToSavepoint();
        const described = describeError(error);
        await tx.recordOperation(op, { state: 'failed', error: described });
        scope.noteFailure(op, described);
        report('failed');
        if (!isRetryableEffectError(error, policy.retryOn) || attempt >= policy.maxAttempts || step.signal.aborted) {
          throw new SideEffectFailedError(runId, stepKey, call.name, call.key, error);
        }
        step.logger.warn('transactional side effect failed; retrying', { runId, step: stepKey, operation: call.name, attempt, error: described });
        await step.clock.sleep(backoffDelay(policy, attempt), step.signal);
        continue;
      }
      effectBoundary('after-effect-before-record', 'after-effect', step, call, true);
      let text: string;
      try {
        text = serialize(result, { runId, step: stepKey, what: `result of side effect '${call.name}'` });
      } catch (error) {
        await tx.rollbackToSavepoint(); // the effect's writes go with it: nothing of it is committed
        throw error;
      }
      await tx.recordOperation(op, { state: 'committed', result: text });
      await tx.releaseSavepoint();
      step.committed.push(call.key);
      report('executed');
      effectBoundary(null, 'effect-recorded', step, call, true);
      return result;
    }
  });
}

function isRetryableEffectError(error: unknown, retryOn: ((error: unknown) => boolean) | undefined): boolean {
  if (error instanceof NonRetryableError) return false;
  if (error instanceof WaypointError && ['LEASE_LOST', 'TRANSACTION_ENDED'].includes(error.code)) return false;
  return retryOn?.(error) ?? true;
}

function decodeResult(record: OperationRecord): unknown {
  return record.result === null ? undefined : deserialize(record.result);
}
