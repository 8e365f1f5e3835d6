import { PipelineDefinitionError } from '../contract/errors';
import type { RetryPolicy } from './options';

/** Checks a `retries` option as given to `@Step` or `@SideEffect`; throws naming the decorated member. */
export function validateRetries(where: string, retries: number | RetryPolicy | undefined): void {
  if (retries === undefined) return;
  if (typeof retries === 'number') {
    if (!Number.isInteger(retries) || retries < 0) throw new PipelineDefinitionError(`${where}: retries must be a whole number >= 0, got ${retries}.`);
    return;
  }
  const p = retries;
  const bad = (field: string, v: unknown) => new PipelineDefinitionError(`${where}: retries.${field} is invalid (${String(v)}).`);
  if (p.maxAttempts !== undefined && !(Number.isInteger(p.maxAttempts) && p.maxAttempts >= 1)) throw bad('maxAttempts', p.maxAttempts);
  if (p.initialDelayMs !== undefined && !(p.initialDelayMs >= 0)) throw bad('initialDelayMs', p.initialDelayMs);
  if (p.maxDelayMs !== undefined && !(p.maxDelayMs >= 0)) throw bad('maxDelayMs', p.maxDelayMs);
  if (p.factor !== undefined && !(p.factor >= 1)) throw bad('factor', p.factor);
  if (p.retryOn !== undefined && typeof p.retryOn !== 'function') throw bad('retryOn', p.retryOn);
}
