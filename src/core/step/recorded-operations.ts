import type { OperationRecord } from '../../contract/checkpoint-store';
import type { ActiveStep } from './run-context';

/**
 * The operation recorded under `key` before this side effect runs, read so that a replayed step costs a
 * constant number of store calls however many recorded calls it goes through (issue 40: a tool loop
 * resumed at its 99th model call replays 98 model and 98 tool records). A step's first lookup is one
 * `getOperation`, as before; when it finds a committed record, the step is replaying, and the run's
 * operations are read once (`listOperations`) and the step's later lookups are answered from them. A key
 * missing there was not recorded when they were read, and only this executor (holding the lease) can
 * record it since, by a `beginOperation` that returns the record if it exists: so a miss is the same
 * answer `getOperation` would give. A record found there in another state than committed is read again.
 * A step that runs for the first time never reads the list.
 *
 * @example
 * const prior = await recordedOperation(step, call.key);
 */
export async function recordedOperation(step: ActiveStep, key: string): Promise<OperationRecord | null> {
  if (step.recorded) {
    const recorded = await step.recorded;
    const hit = recorded?.get(key);
    // A committed record never changes; one in another state may have moved on since: read it again.
    if (recorded && !hit) return null;
    if (hit?.state === 'committed') return hit;
  }
  const prior = await step.store.getOperation(key);
  if (prior?.state === 'committed' && step.recorded === undefined) {
    // A failed read only means the step goes on with one getOperation per call.
    step.recorded = step.store.listOperations(step.runId).then(
      (records) => new Map(records.map((record) => [record.operationKey, record])),
      () => null,
    );
  }
  return prior;
}
