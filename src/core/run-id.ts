import { WaypointError } from './errors';

/**
 * Checks a run id given by a caller: a non-empty string of at most 200 characters (it is a primary key,
 * a Redis key part and a file name in archives). Throws `INVALID_RUN_ID` otherwise.
 */
export function checkRunId(runId: unknown): string {
  if (typeof runId !== 'string' || runId.length === 0 || runId.length > 200) {
    throw new WaypointError('INVALID_RUN_ID', `runId must be a non-empty string of at most 200 characters, got ${JSON.stringify(runId)}.`);
  }
  return runId;
}
