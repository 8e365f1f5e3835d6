import { CheckpointCorruptedError } from '../../contract/errors';
import type { OperationRecord, OperationState, PayloadRewrite, PayloadSwap, RunRecord, RunStatus, StepRecord, StepStatus } from '../../contract/checkpoint-store';

/**
 * Conversions between the store's records and what Redis holds. Redis values are bytes and ioredis
 * sends strings as UTF-8, which cannot carry a lone UTF-16 surrogate: such a string would come back
 * with U+FFFD in its place. Payloads must round-trip byte-exact, so a string that is not well-formed
 * UTF-16 (or that happens to start with the marker) is stored as marker + JSON, which escapes surrogates.
 * Every other string, i.e. all the runtime's serializer output, is stored as is.
 */
const ESCAPED = '\u0000wp-json:';

export function encodeText(text: string): string {
  if (text.startsWith(ESCAPED) || !isWellFormed(text)) return ESCAPED + JSON.stringify(text);
  return text;
}

export function decodeText(stored: string): string {
  return stored.startsWith(ESCAPED) ? (JSON.parse(stored.slice(ESCAPED.length)) as string) : stored;
}

function isWellFormed(text: string): boolean {
  // String.prototype.isWellFormed exists on Node 20 but not in the ES2022 lib typings.
  const native = (text as unknown as { isWellFormed?: () => boolean }).isWellFormed;
  if (native) return native.call(text);
  return !/[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/.test(text);
}

/**
 * A patch value as one script argument: '' leaves the field alone, '0' clears it (null),
 * '1' + text sets it. The scripts' `set_nullable` reads the same convention.
 */
export function nullableArg(value: string | null | undefined): string {
  if (value === undefined) return '';
  return value === null ? '0' : '1' + encodeText(value);
}

/** A flat [field, value, field, value, ...] reply (HGETALL inside a script) as an object. */
export function pairs(flat: unknown): Record<string, string> {
  const out: Record<string, string> = {};
  if (!Array.isArray(flat)) return out;
  for (let i = 0; i + 1 < flat.length; i += 2) out[String(flat[i])] = String(flat[i + 1]);
  return out;
}

const optionalText = (value: string | undefined): string | null => (value === undefined ? null : decodeText(value));
const optionalDate = (value: string | undefined): Date | null => (value === undefined ? null : new Date(Number(value)));

/** The run hash as a record; null when the hash does not exist (HGETALL of a missing key is empty). */
export function toRunRecord(h: Record<string, string>): RunRecord | null {
  if (h.run_id === undefined) return null;
  return {
    runId: h.run_id,
    pipelineName: h.pipeline_name,
    pipelineVersion: h.pipeline_version,
    status: h.status as RunStatus,
    cursorAgent: Number(h.cursor_agent),
    cursorStep: Number(h.cursor_step),
    lastSequence: Number(h.last_sequence),
    input: decodeText(h.input ?? ''),
    metadata: decodeText(h.metadata ?? ''),
    leaseOwner: h.lease_owner ?? null,
    leaseEpoch: Number(h.lease_epoch ?? 0),
    leaseExpiresAt: optionalDate(h.lease_expires_at),
    error: optionalText(h.error),
    resumeHint: optionalText(h.resume_hint),
    createdAt: new Date(Number(h.created_at)),
    updatedAt: new Date(Number(h.updated_at)),
    parentRunId: h.parent_run_id ?? null,
  };
}

/** The operation hash as a record; null when it does not exist. */
export function toOperationRecord(h: Record<string, string>): OperationRecord | null {
  if (h.operation_key === undefined) return null;
  return {
    operationKey: h.operation_key,
    runId: h.run_id,
    stepKey: h.step_key,
    name: h.name,
    state: h.state as OperationState,
    result: optionalText(h.result),
    error: optionalText(h.error),
    attempts: Number(h.attempts),
    createdAt: new Date(Number(h.created_at)),
    updatedAt: new Date(Number(h.updated_at)),
  };
}

/**
 * A step as stored: one JSON document per hash field. JSON escapes what UTF-8 cannot carry, so payloads
 * round-trip exactly; dates are epoch ms. The run id is the key's, not repeated in every entry.
 */
interface StoredStep {
  sequence: number;
  checkpointId: string;
  agentIndex: number;
  agentId: string;
  stepIndex: number;
  stepName: string;
  status: StepStatus;
  output: string;
  memory: string | null;
  idempotencyKey: string;
  sideEffectsCommitted: boolean;
  startedAt: number;
  completedAt: number;
  attempt: number;
  sha256: string;
  /** Only when the step has one: a straight-line step's entry stays byte for byte what it was before. */
  path?: string;
}

export function encodeStep(step: StepRecord): string {
  // Key order matters: stepFieldText relies on output, memory and idempotencyKey following one another.
  const stored: StoredStep = {
    sequence: step.sequence,
    checkpointId: step.checkpointId,
    agentIndex: step.agentIndex,
    agentId: step.agentId,
    stepIndex: step.stepIndex,
    stepName: step.stepName,
    status: step.status,
    output: step.output,
    memory: step.memory,
    idempotencyKey: step.idempotencyKey,
    sideEffectsCommitted: step.sideEffectsCommitted,
    startedAt: step.startedAt.getTime(),
    completedAt: step.completedAt.getTime(),
    attempt: step.attempt,
    sha256: step.sha256,
  };
  if (step.path != null) stored.path = step.path;
  return JSON.stringify(stored);
}

/**
 * The exact text a step's output or memory takes inside an entry written by {@link encodeStep}, with the
 * key that follows it, so a script can compare and replace one payload without parsing the entry (the
 * re-encryption swap, `waypointRewritePayloads`). Inside a JSON string every `"` is escaped, so
 * `"output":` can only be the key itself; JSON.stringify is deterministic, so the text is found exactly
 * when the stored value equals `value`.
 *
 * @example
 * stepFieldText('output', '{"n":1}') // '"output":"{\\"n\\":1}","memory":'
 */
export function stepFieldText(field: 'output' | 'memory', value: string): string {
  return field === 'output' ? `"output":${JSON.stringify(value)},"memory":` : `"memory":${JSON.stringify(value)},"idempotencyKey":`;
}

/**
 * The swaps of a rewrite as `waypointRewritePayloads` arguments: five per swap (kind, target, field,
 * from, to), each value in the form it is stored in.
 *
 * @example
 * rewriteArgs({ input: { from: 'a', to: 'b' } }) // ['run', '', 'input', 'a', 'b']
 */
export function rewriteArgs(rewrite: PayloadRewrite): string[] {
  const args: string[] = [];
  const whole = (kind: 'run' | 'op', target: string, field: string, swap: PayloadSwap | undefined) => {
    if (swap) args.push(kind, target, field, encodeText(swap.from), encodeText(swap.to));
  };
  const step = (sequence: number, field: 'output' | 'memory', swap: PayloadSwap | undefined) => {
    if (swap) args.push('step', String(sequence), field, stepFieldText(field, swap.from), stepFieldText(field, swap.to));
  };
  whole('run', '', 'input', rewrite.input);
  whole('run', '', 'error', rewrite.error);
  for (const s of rewrite.steps ?? []) {
    step(s.sequence, 'output', s.output);
    step(s.sequence, 'memory', s.memory);
  }
  for (const o of rewrite.operations ?? []) {
    whole('op', o.operationKey, 'result', o.result);
    whole('op', o.operationKey, 'error', o.error);
  }
  return args;
}

/** Parses one step entry; an unreadable entry is a corrupted checkpoint, named by run and sequence. */
export function decodeStep(runId: string, field: string, value: string): StepRecord {
  let stored: StoredStep;
  try {
    stored = JSON.parse(value) as StoredStep;
  } catch (error) {
    throw new CheckpointCorruptedError(runId, Number(field), `its Redis entry is not valid JSON (${(error as Error).message})`);
  }
  if (typeof stored !== 'object' || stored === null || stored.sequence !== Number(field)) {
    throw new CheckpointCorruptedError(runId, Number(field), 'its Redis entry does not hold the step stored under this sequence');
  }
  const { startedAt, completedAt, path, ...rest } = stored;
  return { runId, ...rest, startedAt: new Date(startedAt), completedAt: new Date(completedAt), path: path ?? null };
}
