import type { CheckpointStore } from '../../contract/checkpoint-store';
import { RunNotFoundError, WaypointError } from '../../contract/errors';
import { checkSignalName, checkSignalPayloadSize, DEFAULT_MAX_SIGNAL_PAYLOAD_BYTES } from '../../contract/signal-rules';
import { signalKey } from './durable-waits';
import { checkRunId } from '../run/run-id';
import { serialize } from '../state/serializer';

/**
 * `waypoint.signal(runId, name, payload)`: records signal `name` as a committed operation of the run.
 * The name, the run id and the payload (serializable, at most `maxPayloadBytes` serialized) are checked
 * before the first store call, so a refused signal leaves nothing behind. The first delivery wins: false
 * when the signal had already been delivered.
 */
export async function deliverSignal(store: CheckpointStore, runId: string, name: string, payload: unknown, maxPayloadBytes: number): Promise<boolean> {
  checkSignalName(name, { runId: typeof runId === 'string' ? runId : undefined });
  checkRunId(runId);
  const result = serialize(payload, { runId, what: `payload of signal '${name}'` });
  checkSignalPayloadSize(runId, name, result, maxPayloadBytes);
  const run = await store.getRun(runId);
  if (!run) throw new RunNotFoundError(runId);
  if (run.status === 'completed' || run.status === 'cancelled') {
    throw new WaypointError(
      'RUN_FINISHED',
      `Run '${runId}' is ${run.status}; signal '${name}' cannot change it. Signal a run that is still open, or fork this one (waypoint.fork) and signal the fork.`,
      { runId },
    );
  }
  const operationKey = signalKey(runId, name);
  if (await store.getOperation(operationKey)) return false;
  const stored = await store.putOperation({ operationKey, runId, stepKey: '', name: `signal:${name}`, state: 'committed', result, error: null });
  return stored.result === result;
}

/**
 * The `maxSignalPayloadBytes` option, checked: a positive integer number of bytes, or the default (256 KiB).
 *
 * @example
 * signalPayloadLimit(undefined); // 262144
 */
export function signalPayloadLimit(given: number | undefined): number {
  if (given === undefined) return DEFAULT_MAX_SIGNAL_PAYLOAD_BYTES;
  if (!(Number.isSafeInteger(given) && given > 0)) {
    throw new WaypointError('INVALID_ARGUMENT', `maxSignalPayloadBytes must be a positive whole number of bytes, got ${String(given)}. Omit it for the default of 256 KiB.`);
  }
  return given;
}
