import { firstInvalidStep, type Integrity } from '../core/checkpoint-manager';
import type { RunRecord, StepRecord } from '../storage/checkpoint-store';
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
 * Checks every row of a run, not only the first bad one as a load does: each row's digest (SHA-256, or
 * HMAC with `integrity.hmacKey`) and identity, the sequence without gaps, and the run row's
 * `lastSequence` against the last stored row.
 *
 * @example
 * const problems = scanRun(run, steps, { hmacKey });
 * if (problems.length > 0) console.error(problems.map((p) => `${p.runId}#${p.sequence}: ${p.reason}`).join('\n'));
 */
export function scanRun(run: RunRecord, steps: readonly StepRecord[], integrity: Integrity): IntegrityProblem[] {
  const problems: IntegrityProblem[] = [];
  let expected = steps[0]?.sequence ?? 1;
  for (const row of steps) {
    const step = `${row.agentId}/${row.stepName}`;
    const bad = firstInvalidStep(run.runId, [row], integrity);
    if (bad) problems.push({ runId: run.runId, sequence: row.sequence, step, reason: corruptionReason(bad.error.message) });
    else if (row.sequence !== expected) problems.push({ runId: run.runId, sequence: row.sequence, step, reason: `sequence ${expected}..${row.sequence - 1} missing before this row` });
    expected = row.sequence + 1;
  }
  const last = steps[steps.length - 1]?.sequence ?? 0;
  if (last !== run.lastSequence && !(steps.length === 0 && run.lastSequence === 0)) {
    problems.push({ runId: run.runId, sequence: null, step: null, reason: `the run row says the last checkpoint is sequence ${run.lastSequence}, but the last stored row is ${last}` });
  }
  return problems;
}

/** The part of a `CheckpointCorruptedError` message that says what is wrong with the row. */
export function corruptionReason(message: string): string {
  return /is corrupted: (.*?)\. Restore the row/.exec(message)?.[1] ?? message;
}

// Payload prefix of EncryptingCheckpointStore ciphertexts (`wpenc:<format>:<keyId>:...`), and the digest
// prefix of HMAC-sealed rows (checkpoint-manager.ts).
const ENCRYPTED = /^wpenc:\d+:/;
const HMAC = 'hmac-sha256:';

/**
 * Refuses to judge rows this process cannot check, instead of calling every one of them corrupted: rows
 * still encrypted (no encryption keys configured) or sealed with an HMAC when no key is configured.
 *
 * @example
 * assertVerifiable(runId, steps, { encrypted: false, hmac: false }); // throws a usage error for sealed rows
 */
export function assertVerifiable(runId: string, steps: readonly StepRecord[], configured: { encrypted: boolean; hmac: boolean }): void {
  if (!configured.encrypted && steps.some((s) => ENCRYPTED.test(s.output) || (s.memory !== null && ENCRYPTED.test(s.memory)))) {
    throw usageError(`the checkpoints of run '${runId}' are encrypted at rest: give --module whose createWaypointOptions() returns the encryption keys`);
  }
  if (!configured.hmac && steps.some((s) => s.sha256.startsWith(HMAC))) {
    throw usageError(`the checkpoints of run '${runId}' are sealed with an HMAC: set WAYPOINT_HMAC_KEY, or give --module whose createWaypointOptions() returns hmacKey`);
  }
}
