import { createHmac, hash as oneShotHash, randomUUID, timingSafeEqual } from 'node:crypto';
import type { RunRecord, StepRecord } from '../../contract/checkpoint-store';
import { CheckpointCorruptedError } from '../../contract/errors';
import type { StepPlan } from '../plan/plan-reader';
import { sha256 } from '../state/serializer';
import { deserialize } from '../state/value-decoder';

/*
 * How a run's rows are sealed and checked: the digest of a row (over every column, the run's identity
 * and the link of the row before it), the rows the runtime writes for itself, and the one set of checks
 * that a load, a resume, verify and the timeline all apply. Folding rows into state is checkpoint-manager.ts.
 */

/** Agent id of rows the runtime writes for itself (base snapshots, state patches); never a plan step. */
export const SYSTEM_AGENT = '$waypoint';

/** A step row's path: its own (control flow), or `agentId/stepName` for a straight line's rows (and rows of earlier releases). */
export function rowPath(row: Pick<StepRecord, 'path' | 'agentId' | 'stepName'>): string {
  return row.path ?? `${row.agentId}/${row.stepName}`;
}

/**
 * How step rows are sealed. Without a key: SHA-256 (detects corruption). With `hmacKey`: HMAC-SHA-256,
 * which someone who can write the database but does not hold the key cannot forge (tamper-evident).
 */
export interface Integrity {
  hmacKey?: Buffer;
}

const HMAC_PREFIX = 'hmac-sha256:';
/** Marks a digest of the chained format (every column, the run's identity, the previous row's link). */
const CHAINED = 'v2:';
/** Tags the optional `path` column inside a digest (see stepDigest). */
const PATH_TAG = 'path';

/** True when a stored digest is an HMAC (written with an `hmacKey`), whatever its format version. */
export function isHmacSealed(digest: string): boolean {
  return digest.startsWith(HMAC_PREFIX);
}

/**
 * What every row of a run is sealed against besides its own columns: the run's pipeline name and input.
 * A changed byte in either makes every chained row of the run fail its check.
 */
export function runIdentity(run: Pick<RunRecord, 'pipelineName' | 'input'>): string {
  return sha256(framed(run.pipelineName) + framed(run.input));
}

/** Where a new row sits: the run's identity and the link of the row before it ('' for the first row). */
export interface ChainPosition {
  identity: string;
  prev: string;
}

/**
 * Integrity digest of a step row. The chained format (written since schema 2 of the digest, marked
 * `v2:`) covers every column of the row, the run's identity and the previous row's link, so a changed
 * byte anywhere, a row moved to another run or sequence, a deleted or swapped row, a replayed older row
 * or an altered run input is detected on load. Without `chain` it is the first format (identity and
 * payload columns only), kept to verify rows written before it.
 */
export function stepDigest(step: Omit<StepRecord, 'sha256'>, integrity: Integrity = {}, chain?: ChainPosition): string {
  // Each field as "<length>:<text>" in a fixed order: unambiguous, and the payloads are fed as they are
  // instead of being escaped into one more JSON string (the output is most of the bytes).
  // The short fields go in as one string, the payloads as they are: three native calls instead of 24.
  let head =
    framed(step.runId) +
    framed(String(step.sequence)) +
    framed(String(step.agentIndex)) +
    framed(step.agentId) +
    framed(String(step.stepIndex)) +
    framed(step.stepName) +
    framed(step.status) +
    framed(step.idempotencyKey) +
    framed(step.sideEffectsCommitted ? '1' : '0') +
    framed(String(step.attempt));
  if (chain) {
    head =
      framed(CHAINED) +
      head +
      framed(chain.identity) +
      framed(chain.prev) +
      framed(step.checkpointId) +
      framed(String(step.startedAt.getTime())) +
      framed(String(step.completedAt.getTime()));
  }
  head += `${step.output.length}:`;
  const memory = step.memory === null ? '\u0000null' : step.memory;
  // Optional columns come last, each as a framed tag then its framed value, and only when set: a row
  // without them (every row written before they existed) hashes exactly as it always did, and since
  // every field is framed, a row with one can never produce the bytes of a row without it.
  const tail = step.path != null ? framed(PATH_TAG) + framed(step.path) : '';
  if (integrity.hmacKey) {
    const mac = createHmac('sha256', integrity.hmacKey).update(head).update(step.output).update(`${memory.length}:`).update(memory);
    if (tail) mac.update(tail);
    return HMAC_PREFIX + (chain ? CHAINED : '') + mac.digest('hex');
  }
  // One concatenated string hashes the same bytes as the parts fed one by one: UTF-8 of a concatenation is
  // the concatenation of the UTF-8s unless a part ending in a high surrogate meets one starting with a low
  // surrogate, and here every part that can start with one (output, memory) follows a ':' while the others
  // start with a digit. The one-shot hash skips a Hash object and four native calls per row.
  return (chain ? CHAINED : '') + oneShotHash('sha256', head + step.output + `${memory.length}:` + memory + tail, 'hex');
}

function framed(field: string): string {
  return `${field.length}:${field}`;
}

export interface StepRecordInput {
  runId: string;
  sequence: number;
  step: StepPlan;
  output: string;
  memory: string | null;
  idempotencyKey: string;
  sideEffectsCommitted: boolean;
  startedAt: Date;
  completedAt: Date;
  attempt: number;
  /** 'skipped' for a step whose `when` said no. Default 'completed'. */
  status?: 'completed' | 'skipped';
}

/** Builds the row for a completed step, chained to the row before it, digest included. */
export function buildStepRecord(input: StepRecordInput, integrity: Integrity, chain: ChainPosition, path: string | null = null): StepRecord {
  const record: Omit<StepRecord, 'sha256'> = {
    runId: input.runId,
    sequence: input.sequence,
    checkpointId: randomUUID(),
    agentIndex: input.step.agentIndex,
    agentId: input.step.agentId,
    stepIndex: input.step.stepIndex,
    stepName: input.step.name,
    status: input.status ?? 'completed',
    output: input.output,
    memory: input.memory,
    idempotencyKey: input.idempotencyKey,
    sideEffectsCommitted: input.sideEffectsCommitted,
    startedAt: input.startedAt,
    completedAt: input.completedAt,
    attempt: input.attempt,
  };
  // A path is stored (and sealed) only where it says more than agentId/stepName: a straight line's rows are as before.
  if (path !== null) record.path = path;
  return sealed(record, integrity, chain);
}

/**
 * The row with its digest, as the last property (where a spread copy put it): the record is the
 * caller's own new object, so it is completed in place rather than copied at every step.
 */
function sealed(record: Omit<StepRecord, 'sha256'>, integrity: Integrity, chain: ChainPosition): StepRecord {
  const row = record as StepRecord;
  row.sha256 = stepDigest(record, integrity, chain);
  return row;
}

/**
 * A row the runtime writes for itself: a `base` snapshot, a state `patch`, a control-flow `decision`,
 * `join` or `merge` (core/flow/join-rows.ts), not a plan step. A base row
 * written by retention is the first row its run keeps (its chain starts over, `prev` ''); the
 * `replaces` link inside its payload is what the row after it was chained to.
 */
export function systemRow(
  runId: string,
  sequence: number,
  kind: 'base' | 'patch' | 'decision' | 'join' | 'merge',
  output: string,
  memory: string | null,
  at: Date,
  integrity: Integrity,
  chain: ChainPosition,
  path: string | null = null,
): StepRecord {
  const record: Omit<StepRecord, 'sha256'> = {
    runId,
    sequence,
    checkpointId: randomUUID(),
    agentIndex: -1,
    agentId: SYSTEM_AGENT,
    stepIndex: -1,
    stepName: kind,
    status: 'skipped',
    output,
    memory,
    idempotencyKey: sha256(JSON.stringify(['system', runId, sequence])),
    sideEffectsCommitted: false,
    startedAt: at,
    completedAt: at,
    attempt: 1,
  };
  if (path !== null) record.path = path;
  return sealed(record, integrity, chain);
}

/**
 * What the row after `row` is chained to: its digest, or for a base row written by retention, the digest
 * of the row it replaced (the row after it was written before the fold).
 */
export function linkOf(row: StepRecord): string {
  if (row.agentId === SYSTEM_AGENT && row.stepName === 'base') {
    const replaces = baseReplaces(row);
    if (replaces !== undefined) return replaces;
  }
  return row.sha256;
}

/** Where `baseReplaces` keeps what it read, on the row object (not enumerable: a copy `{ ...row }` leaves it). */
const REPLACES = Symbol('the base row payload link');

/**
 * What a base row written by retention (or a resume snapshot) replaced: its payload's `replaces`, kept with
 * the output it was read from, so a resume's checks of one snapshot parse its payload once.
 */
function baseReplaces(row: StepRecord): string | undefined {
  const known = (row as { [REPLACES]?: [output: string, replaces: string | undefined] })[REPLACES];
  if (known && known[0] === row.output) return known[1];
  const replaces = payloadReplaces(row.output);
  if (Object.isExtensible(row)) Object.defineProperty(row, REPLACES, { value: [row.output, replaces], configurable: true, writable: true });
  return replaces;
}

function payloadReplaces(output: string): string | undefined {
  try {
    const replaces = deserialize<{ replaces?: unknown }>(output)?.replaces;
    return typeof replaces === 'string' ? replaces : undefined;
  } catch {
    return undefined;
  }
}

/** The fields of a run its integrity check reads. */
export type CheckedRun = Pick<RunRecord, 'runId' | 'pipelineName' | 'input' | 'lastSequence'>;

/** One integrity problem found in a run's rows. */
export interface RowProblem {
  /** Index into the rows checked of the first row concerned (the row count for rows missing at the end). */
  index: number;
  /** Sequence concerned: the bad row's, or the first missing one. */
  sequence: number;
  error: CheckpointCorruptedError;
}

/** Throws `CheckpointCorruptedError` for the first problem `checkRows` finds. */
export function verifySteps(run: CheckedRun, steps: readonly StepRecord[], integrity: Integrity = {}): void {
  const problem = firstInvalidStep(run, steps, integrity);
  if (problem !== null) throw problem.error;
}

/** The first problem of the run's rows (in sequence order), or null when all pass. */
export function firstInvalidStep(run: CheckedRun, steps: readonly StepRecord[], integrity: Integrity = {}): RowProblem | null {
  return checkRows(run, steps, integrity, true)[0] ?? null;
}

/**
 * Checks the stored rows of a run against each other and against the run row, and returns every problem
 * (or only the first with `firstOnly`), whatever the rows contain; it never throws.
 *
 * - each row: its run, its seal (HMAC where a key is configured, never where none is), its digest over
 *   every column and, in the chained format, the run's identity and the link of the row before it;
 * - the sequence: starting at 1 (only a base row written by retention may start later), without gaps,
 *   and ending at the run row's `lastSequence` (a deleted or moved last row);
 * - the format: a row in the first format after a chained one was not written by Waypoint.
 *
 * Rows beyond `lastSequence` are only checked row by row: a reader may see a step committed after it read
 * the run row.
 */
export function checkRows(run: CheckedRun, steps: readonly StepRecord[], integrity: Integrity, firstOnly = false): RowProblem[] {
  const problems: RowProblem[] = [];
  const identity = runIdentity(run);
  let link: string | null = '';
  let expected = 1;
  let chainedSeen = false;
  for (let index = 0; index < steps.length; index++) {
    const row = steps[index];
    const report = (sequence: number, why: string) => problems.push({ index, sequence, error: new CheckpointCorruptedError(run.runId, sequence, why) });
    // A base row's payload (the whole state) is parsed once here, for both uses of what it replaced.
    const replaces = row.agentId === SYSTEM_AGENT && row.stepName === 'base' ? baseReplaces(row) : undefined;
    if (index === 0 && row.sequence !== 1 && !startsRetainedRun(row, replaces)) {
      report(
        1,
        `sequence${row.sequence > 2 ? `s 1..${row.sequence - 1} are` : ' 1 is'} missing: the run's first stored row is sequence ${row.sequence}, and only a base row written by retention may start a run later`,
      );
      link = null;
    } else if (index > 0 && row.sequence !== expected) {
      report(
        expected,
        row.sequence > expected
          ? `sequence${row.sequence - expected > 1 ? `s ${expected} to ${row.sequence - 1} are` : ` ${expected} is`} missing (the next stored row is ${row.sequence})`
          : `sequence ${row.sequence} is stored twice or out of order`,
      );
      link = null;
    }
    if (firstOnly && problems.length > 0) return problems;
    const why = rowProblem(run.runId, row, integrity, identity, index === 0 ? '' : link, chainedSeen);
    if (why !== null) report(row.sequence, why);
    if (firstOnly && problems.length > 0) return problems;
    chainedSeen ||= row.sha256.includes(CHAINED);
    link = replaces ?? row.sha256; // linkOf(row)
    expected = Math.max(expected, row.sequence + 1);
  }
  const last = steps.length === 0 ? 0 : steps[steps.length - 1].sequence;
  if (last < run.lastSequence) {
    const from = last + 1;
    problems.push({
      index: steps.length,
      sequence: from,
      error: new CheckpointCorruptedError(
        run.runId,
        from,
        `sequence${run.lastSequence > from ? `s ${from} to ${run.lastSequence} are` : ` ${from} is`} missing: the run row says its last checkpoint is sequence ${run.lastSequence}, but the last stored row is ${last === 0 ? 'none' : `sequence ${last}`}`,
      ),
    });
  }
  return problems;
}

/** A first stored row that may sit past sequence 1: a base row retention wrote in place of the rows before. */
function startsRetainedRun(row: StepRecord, replaces: string | undefined): boolean {
  if (row.agentId !== SYSTEM_AGENT || row.stepName !== 'base') return false;
  return !row.sha256.includes(CHAINED) || replaces !== undefined;
}

/** Why one row fails its own checks, or null. `prev` is null when the row before it is missing. */
function rowProblem(runId: string, row: StepRecord, integrity: Integrity, identity: string, prev: string | null, chainedSeen: boolean): string | null {
  if (row.runId !== runId) return `row belongs to run '${row.runId}'`;
  const stored = row.sha256;
  const hmac = isHmacSealed(stored);
  if (integrity.hmacKey && !hmac) return 'the row has a plain SHA-256 but an HMAC key is configured, so it may have been rewritten without the key';
  if (!integrity.hmacKey && hmac) return 'the row is sealed with an HMAC but no hmacKey is configured; configure the key it was written with';
  const chained = stored.startsWith(CHAINED, hmac ? HMAC_PREFIX.length : 0);
  if (!chained && chainedSeen) return 'the row is sealed in the older digest format after rows in the newer one, which Waypoint never writes';
  // The row before is missing: its link is unknown, and the gap is reported already.
  if (chained && prev === null) return null;
  const { sha256: _stored, ...rest } = row;
  let actual: string;
  try {
    actual = stepDigest(rest, integrity, chained ? { identity, prev: prev ?? '' } : undefined);
  } catch (error) {
    return `a column holds a value of the wrong type (${error instanceof Error ? error.message : String(error)})`;
  }
  if (!sameText(actual, stored)) {
    if (hmac)
      return "HMAC does not match: the row (or its run's input or pipeline name, or the row before it) was altered, or the configured hmacKey is not the one it was written with";
    return chained
      ? "SHA-256 of the stored payload does not match: the row, its run's input or pipeline name, or the row before it was altered"
      : 'SHA-256 of the stored payload does not match';
  }
  return null;
}

/** Constant-time comparison of two texts of any characters (a digest column may hold anything). */
function sameText(a: string, b: string): boolean {
  const x = Buffer.from(a);
  const y = Buffer.from(b);
  return x.length === y.length && timingSafeEqual(x, y);
}
