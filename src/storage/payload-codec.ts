import type { OperationOutcome, OperationRecord, RunRecord, StepRecord, StreamEvent } from '../contract/checkpoint-store';

/**
 * Which stored payload a value is: its record and field. A codec binds what it writes to it, so a value
 * moved onto another record (or field) fails to decode.
 */
export type PayloadSlot =
  | { runId: string; field: 'input' | 'error' }
  | { runId: string; sequence: number; field: 'output' | 'memory' }
  | { runId: string; operationKey: string; field: 'result' | 'error' }
  /** A part of the run's output stream: bound to its step and attempt (its offset is only known after the append). */
  | { runId: string; step: string; attempt: number; field: 'data' };

/**
 * A transformation of every payload on its way into and out of a store (encryption today), applied in
 * one place: `CodecCheckpointStore`. Identifiers, statuses, timestamps and digests never pass through it.
 *
 * @example
 * const upper: CheckpointPayloadCodec = { encode: (text) => text.toUpperCase(), decode: (text) => text.toLowerCase() };
 * const store = new CodecCheckpointStore(new MemoryCheckpointStore(), upper);
 */
export interface CheckpointPayloadCodec {
  /** The stored form of `text`, bound to `slot`. */
  encode(text: string, slot: PayloadSlot): string;
  /** The payload `text` stored at `slot` holds; throws (a `CheckpointCorruptedError`) when it cannot be decoded. */
  decode(text: string, slot: PayloadSlot): string;
}

/** `encode` or `decode` of a codec. */
export type PayloadTransform = (text: string, slot: PayloadSlot) => string;

/**
 * The binding of a slot as the encryption's additional authenticated data. Byte-for-byte what every
 * release has sealed with: `<runId>:input`, `<runId>:error`, `<runId>:<sequence>:output|memory`,
 * `<operationKey>:result|error`; a stream part (issue 37): `<runId>:stream:<attempt>:<step>:data`.
 *
 * @example
 * slotBinding({ runId: 'q3', sequence: 4, field: 'output' }); // 'q3:4:output'
 */
export function slotBinding(slot: PayloadSlot): string {
  if ('sequence' in slot) return `${slot.runId}:${slot.sequence}:${slot.field}`;
  if ('attempt' in slot) return `${slot.runId}:stream:${slot.attempt}:${slot.step}:${slot.field}`;
  if ('operationKey' in slot) return `${slot.operationKey}:${slot.field}`;
  return `${slot.runId}:${slot.field}`;
}

/** The step row number a slot names in an error (0 for the run row and operations). */
export function slotSequence(slot: PayloadSlot): number {
  return 'sequence' in slot ? slot.sequence : 0;
}

// The one list of which record fields are payloads: every codec path (reads, writes, transactions) maps through these.

export function mapRunPayloads<R extends Pick<RunRecord, 'runId' | 'input'> & { error?: string | null }>(run: R, f: PayloadTransform): R {
  const out = { ...run, input: f(run.input, { runId: run.runId, field: 'input' }) };
  if (typeof run.error === 'string') out.error = f(run.error, { runId: run.runId, field: 'error' });
  return out;
}

export function mapStepPayloads(step: StepRecord, f: PayloadTransform): StepRecord {
  const at = { runId: step.runId, sequence: step.sequence };
  return { ...step, output: f(step.output, { ...at, field: 'output' }), memory: step.memory === null ? null : f(step.memory, { ...at, field: 'memory' }) };
}

export function mapOperationPayloads<O extends Pick<OperationRecord, 'runId' | 'operationKey' | 'result' | 'error'>>(op: O, f: PayloadTransform): O {
  const at = { runId: op.runId, operationKey: op.operationKey };
  return {
    ...op,
    result: op.result === null ? null : f(op.result, { ...at, field: 'result' }),
    error: op.error === null ? null : f(op.error, { ...at, field: 'error' }),
  };
}

export function mapOutcomePayload(runId: string, operationKey: string, outcome: OperationOutcome, f: PayloadTransform): OperationOutcome {
  const at = { runId, operationKey };
  return outcome.state === 'committed'
    ? { state: 'committed', result: f(outcome.result, { ...at, field: 'result' }) }
    : { state: 'failed', error: f(outcome.error, { ...at, field: 'error' }) };
}

/** A stream event with its part's data mapped (the other kinds carry no payload). */
export function mapEventPayload<E extends StreamEvent>(runId: string, event: E, f: PayloadTransform): E {
  if (event.kind !== 'part') return event;
  return { ...event, data: f(event.data, { runId, step: event.step, attempt: event.attempt, field: 'data' }) };
}
