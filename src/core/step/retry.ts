import type { ResolvedRetryPolicy } from '../plan/plan-reader';

/**
 * Delay before attempt `failedAttempt + 1`: exponential from `initialDelayMs` by `factor`, capped at
 * `maxDelayMs`, with full jitter when enabled (spreads retries of many runs hitting the same outage).
 */
export function backoffDelay(policy: ResolvedRetryPolicy, failedAttempt: number, random: () => number = Math.random): number {
  const raw = policy.initialDelayMs === 0 ? 0 : policy.initialDelayMs * Math.pow(policy.factor, failedAttempt - 1);
  const exp = Number.isFinite(raw) ? Math.min(policy.maxDelayMs, raw) : policy.maxDelayMs;
  return policy.jitter ? Math.floor(random() * exp) : exp;
}
