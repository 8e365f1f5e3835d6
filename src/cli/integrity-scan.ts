import { checkRows, isHmacSealed, type Integrity } from '../core/history/row-integrity';
import { undecodableInput, undecodableRows } from '../core/history/row-decoding';
import type { RunRecord, StepRecord } from '../contract/checkpoint-store';
import { usageError } from './exit-codes';

/** One integrity problem of a stored run. */
export interface IntegrityProblem {
  runId: string;
  /** The row's sequence, or null for a problem of the run row itself. */
  sequence: number | null;
  /** `agentId/stepName` of the row, when there is one. */
  step: string | null;
  reason: string;
}

/**
 * Checks every row of a run, not only the first bad one as a load does, with the same rules (see
 * `checkRows`): each row's digest (SHA-256, or HMAC with `integrity.hmacKey`), identity and chain, the
 * sequence from 1 without gaps, and the run row's `lastSequence` against the last stored row; and that every
 * payload (the run's input, each row's output and memory) can be read back by this process. Never throws.
 *
 * @example
 * const problems = scanRun(run, steps, { hmacKey });
 * if (problems.length > 0) console.error(problems.map((p) => `${p.runId}#${p.sequence}: ${p.reason}`).join('\n'));
 */
export function scanRun(run: RunRecord, steps: readonly StepRecord[], integrity: Integrity): IntegrityProblem[] {
  const sealed = checkRows(run, steps, integrity);
  // A row whose seal fails is reported for that; the others must also decode, or a load would fail on them.
  const reported = new Set(sealed.map((problem) => problem.sequence));
  const problems: IntegrityProblem[] = [...sealed, ...undecodableRows(run, steps, reported)].map((problem) => {
    const row = steps[problem.index];
    const step = row && row.sequence === problem.sequence ? `${row.agentId}/${row.stepName}` : null;
    return { runId: run.runId, sequence: problem.sequence, step, reason: corruptionReason(problem.error.message) };
  });
  const input = undecodableInput(run);
  if (input !== null) problems.unshift({ runId: run.runId, sequence: null, step: null, reason: input });
  return problems.sort((a, b) => (a.sequence ?? -1) - (b.sequence ?? -1));
}

/** The part of a `CheckpointCorruptedError` message that says what is wrong with the row. */
export function corruptionReason(message: string): string {
  return /is corrupted: (.*?)\. Restore the row/.exec(message)?.[1] ?? message;
}

// Payload prefix of EncryptingCheckpointStore ciphertexts (`wpenc:<format>:<keyId>:...`).
const ENCRYPTED = /^wpenc:\d+:/;

/**
 * Refuses to judge rows this process cannot check, instead of calling every one of them corrupted: rows
 * still encrypted (no encryption keys configured) or sealed with an HMAC when no key is configured.
 *
 * @example
 * assertVerifiable(runId, steps, { encrypted: false, hmac: false }); // throws a usage error for sealed rows
 */
export function assertVerifiable(runId: string, steps: readonly StepRecord[], configured: { encrypted: boolean; hmac: boolean }): void {
  if (!configured.encrypted && steps.some((s) => ENCRYPTED.test(s.output) || (s.memory !== null && ENCRYPTED.test(s.memory)))) {
    throw usageError(`The checkpoints of run '${runId}' are encrypted at rest: give --module whose createWaypointOptions() returns the encryption keys.`);
  }
  if (!configured.hmac && steps.some((s) => isHmacSealed(s.sha256))) {
    throw usageError(`The checkpoints of run '${runId}' are sealed with an HMAC: set WAYPOINT_HMAC_KEY, or give --module whose createWaypointOptions() returns hmacKey.`);
  }
}
