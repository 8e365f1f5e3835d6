import { StreamLimitError } from '../../contract/errors';
import { encodePart } from '../stream/part-encoding';
import type { ActiveStep } from './run-context';
import type { RunStreamWriter } from '../stream/run-stream-writer';
import type { AttemptResult } from '../run/execution';

/**
 * `ctx.emit(part)` / `currentStep().emit(part)`: serializes and checks the part at once (a value that
 * cannot be stored, a part over `maxPartBytes`, a stream at `maxEventsPerRun` each throw their typed error
 * here, in the step), then hands it to the run's stream writer, which appends it later: this never waits
 * for the store. The attempt remembers the part's number, so its row waits until the part is stored. A
 * part emitted after its attempt ended (a callback left running after a timeout) is dropped: it belongs to
 * no attempt that can be recorded. With a store that keeps no streams it is dropped with one warning per run.
 */
export function emitPart(active: ActiveStep, part: unknown): void {
  const stream = active.stream;
  // Before any check: a callback left running after its attempt ended must not throw into nowhere.
  if (active.ended) {
    active.logger.debug('part emitted after its step attempt ended was dropped');
    return;
  }
  const data = encodePart(part, active.runId, active.stepKey, stream.limits.maxPartBytes);
  if (!stream.enabled) return stream.warnDisabled(active.stepKey);
  if (stream.length >= stream.limits.maxEventsPerRun) throw new StreamLimitError(active.runId, active.stepKey, 'events', stream.length, stream.limits.maxEventsPerRun);
  const number = stream.part(active.stepKey, active.attempt, data);
  if (number === 0) return; // the execution's stream is closed (the run ended): nothing can record this attempt
  active.emitted = number;
  active.parts += 1;
}

/**
 * What a step's row waits for before its append: the step's stream events up to number `attempt.emitted`
 * stored (a rejected append rejects). Inside an exclusive transaction (SQLite's one writer, taken by a
 * transactional side effect) the stream's append cannot run before the row's commit, so the row does not
 * wait; the caller waits for the parts right after the commit instead (docs/live-output.md).
 */
export async function partsBeforeRow(stream: RunStreamWriter, attempt: AttemptResult): Promise<void> {
  if (attempt.transaction && !(await attempt.transaction.allowsOutsideWrites())) return;
  await stream.durable(attempt.emitted);
}
