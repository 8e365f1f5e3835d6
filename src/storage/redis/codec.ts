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
 *
 * The keys are one or two letters (written since the second Redis step format): the long names of the
 * first format cost 119 bytes per row, about a tenth of a 1 KB step. Entries of the first format
 * (`LegacyStoredStep`) are still read, and rewritten in place by `waypointRewritePayloads`, as they are.
 */
interface StoredStep {
  /** sequence */
  q: number;
  /** checkpointId */
  c: string;
  /** agentIndex */
  ai: number;
  /** agentId */
  a: string;
  /** stepIndex */
  si: number;
  /** stepName */
  n: string;
  /** status */
  s: StepStatus;
  /** output */
  o: string;
  /** memory */
  m: string | null;
  /** idempotencyKey */
  k: string;
  /** sideEffectsCommitted */
  e: boolean;
  /** startedAt (epoch ms) */
  t0: number;
  /** completedAt (epoch ms) */
  t1: number;
  /** attempt */
  at: number;
  /** sha256 (the row's digest) */
  h: string;
  /** path: only when the step has one */
  p?: string;
}

/** A step entry of the first format (long key names), written by releases before the short keys. */
interface LegacyStoredStep {
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
  path?: string;
}

export function encodeStep(step: StepRecord): string {
  // Key order matters: the rewrite script finds a payload by the keys around it (o then m, m then k).
  const stored: StoredStep = {
    q: step.sequence,
    c: step.checkpointId,
    ai: step.agentIndex,
    a: step.agentId,
    si: step.stepIndex,
    n: step.stepName,
    s: step.status,
    o: step.output,
    m: step.memory,
    k: step.idempotencyKey,
    e: step.sideEffectsCommitted,
    t0: step.startedAt.getTime(),
    t1: step.completedAt.getTime(),
    at: step.attempt,
    h: step.sha256,
  };
  if (step.path != null) stored.p = step.path;
  return JSON.stringify(stored);
}

/**
 * The keys around a step's output or memory inside an entry, per format: what `waypointRewritePayloads`
 * puts around the JSON text of a value to find it (its Lua spells the same pairs).
 */
export const STEP_FIELD_KEYS = {
  output: { short: ['"o":', ',"m":'], legacy: ['"output":', ',"memory":'] },
  memory: { short: ['"m":', ',"k":'], legacy: ['"memory":', ',"idempotencyKey":'] },
} as const;

/**
 * The exact text a step's output or memory takes inside an entry (of the given format), with the keys
 * around it, so a script can compare and replace one payload without parsing the entry (the
 * re-encryption swap, `waypointRewritePayloads`). Inside a JSON string every `"` is escaped, so the key
 * before the value can only be the key itself; JSON.stringify is deterministic, so the text is found
 * exactly when the stored value equals `value`.
 *
 * @example
 * stepFieldText('output', '{"n":1}') // '"o":"{\\"n\\":1}","m":'
 */
export function stepFieldText(field: 'output' | 'memory', value: string, format: 'short' | 'legacy' = 'short'): string {
  const [before, after] = STEP_FIELD_KEYS[field][format];
  return before + JSON.stringify(value) + after;
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
  // A step payload goes as its JSON text: the script tries it between the keys of either entry format.
  const step = (sequence: number, field: 'output' | 'memory', swap: PayloadSwap | undefined) => {
    if (swap) args.push('step', String(sequence), field, JSON.stringify(swap.from), JSON.stringify(swap.to));
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

/** Parses one step entry (either format); an unreadable entry is a corrupted checkpoint, named by run and sequence. */
export function decodeStep(runId: string, field: string, value: string): StepRecord {
  let stored: StoredStep | LegacyStoredStep;
  try {
    stored = JSON.parse(value) as StoredStep | LegacyStoredStep;
  } catch (error) {
    throw new CheckpointCorruptedError(runId, Number(field), `its Redis entry is not valid JSON (${(error as Error).message})`);
  }
  if (typeof stored !== 'object' || stored === null) throw new CheckpointCorruptedError(runId, Number(field), 'its Redis entry is not an object');
  const step = 'q' in stored ? fromShort(runId, stored) : fromLegacy(runId, stored);
  if (step.sequence !== Number(field)) throw new CheckpointCorruptedError(runId, Number(field), 'its Redis entry does not hold the step stored under this sequence');
  return step;
}

function fromShort(runId: string, e: StoredStep): StepRecord {
  return {
    runId,
    sequence: e.q,
    checkpointId: e.c,
    agentIndex: e.ai,
    agentId: e.a,
    stepIndex: e.si,
    stepName: e.n,
    status: e.s,
    output: e.o,
    memory: e.m,
    idempotencyKey: e.k,
    sideEffectsCommitted: e.e,
    startedAt: new Date(e.t0),
    completedAt: new Date(e.t1),
    attempt: e.at,
    sha256: e.h,
    path: e.p ?? null,
  };
}

function fromLegacy(runId: string, e: LegacyStoredStep): StepRecord {
  const { startedAt, completedAt, path, ...rest } = e;
  return { runId, ...rest, startedAt: new Date(startedAt), completedAt: new Date(completedAt), path: path ?? null };
}
