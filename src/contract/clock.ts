/**
 * Time as the runtime sees it. Bound in the container so tests can swap in a fake clock and no test has
 * to sleep for real.
 */
export interface Clock {
  now(): Date;
  /** Resolves after `ms`, or rejects with the signal's reason when it aborts first. */
  sleep(ms: number, signal?: AbortSignal): Promise<void>;
}
