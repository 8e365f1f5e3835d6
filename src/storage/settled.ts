/**
 * Runs synchronous work behind a Promise-returning store method exactly as an `async` method would: the
 * work runs at once, its value resolves the promise and a throw rejects it (never a synchronous throw at
 * the caller). For the stores whose work is synchronous (memory, better-sqlite3), which have nothing to
 * await.
 *
 * @example
 * getRun(runId: string): Promise<RunRecord | null> {
 *   return settled(() => this.rows.get(runId) ?? null);
 * }
 */
export function settled<T>(work: () => T): Promise<T> {
  return new Promise<T>((resolve) => resolve(work()));
}
