import { WaypointError, type WaypointErrorCode } from '../contract/errors';

/**
 * Exit codes of the `waypoint` command. Scripts branch on them; they never change meaning.
 *
 * | code | meaning |
 * | --- | --- |
 * | 0 | success (`runs resume`: the run completed) |
 * | 1 | the operation failed (`runs resume`: the run failed; the store refused a value or statement, STORE_REJECTED; any unexpected error) |
 * | 2 | usage: unknown command or option, bad value, bad `--store` URL or `--module`, an invalid signal name or a signal payload over the limit |
 * | 3 | not found: no such run, step or checkpoint (or nothing of the run archived) |
 * | 4 | corrupted rows found (`verify`), values no configured key opens (`reencrypt`), or a command stopped at a corrupted row |
 * | 5 | store unavailable: cannot connect, or no Waypoint tables / file there (run `waypoint-durable migrate`); or the archive did not answer |
 * | 6 | conflict: the run is locked by a live worker, already finished or cancelled, or the fork target exists |
 * | 75 | `runs resume` left the run paused or waiting (resume it again later; EX_TEMPFAIL) |
 *
 * @example
 * waypoint-durable verify || [ $? -eq 4 ] && page-oncall "corrupted checkpoints"
 */
export const EXIT = {
  OK: 0,
  FAILURE: 1,
  USAGE: 2,
  NOT_FOUND: 3,
  CORRUPTED: 4,
  STORE_UNAVAILABLE: 5,
  CONFLICT: 6,
  PAUSED: 75,
} as const;

export type ExitCode = (typeof EXIT)[keyof typeof EXIT];

/** An error of the command line itself (bad flag value, store URL, module), with its exit code. */
export class CliError extends WaypointError {
  readonly exitCode: ExitCode;
  constructor(code: WaypointErrorCode, message: string, exitCode: ExitCode, details: { runId?: string; cause?: unknown } = {}) {
    super(code, message, details);
    this.exitCode = exitCode;
  }
}

/** A wrong argument or option value (exit 2). */
export function usageError(message: string, cause?: unknown): CliError {
  return new CliError('CLI_USAGE', message, EXIT.USAGE, { cause });
}

/** No run `runId` in the store (exit 3). */
export function runNotFound(runId: string, store: string): CliError {
  return new CliError(
    'RUN_NOT_FOUND',
    `Run '${runId}' is not in ${store}. Check the run id (waypoint-durable runs list shows the runs), or point --store at the store that holds it.`,
    EXIT.NOT_FOUND,
    { runId },
  );
}

const BY_CODE: Partial<Record<WaypointErrorCode, ExitCode>> = {
  RUN_NOT_FOUND: EXIT.NOT_FOUND,
  NO_SUCH_STEP: EXIT.NOT_FOUND,
  NO_SUCH_CHECKPOINT: EXIT.NOT_FOUND,
  NOT_ARCHIVED: EXIT.NOT_FOUND,
  ARCHIVE_UNAVAILABLE: EXIT.STORE_UNAVAILABLE,
  CHECKPOINT_CORRUPTED: EXIT.CORRUPTED,
  STORE_UNAVAILABLE: EXIT.STORE_UNAVAILABLE,
  // Reached but refused: retrying will not help, so not exit 5 (which scripts retry).
  STORE_REJECTED: EXIT.FAILURE,
  RUN_LOCKED: EXIT.CONFLICT,
  INVALID_TRANSITION: EXIT.CONFLICT,
  RUN_EXISTS: EXIT.CONFLICT,
  RUN_CANCELLED: EXIT.CONFLICT,
  RUN_FINISHED: EXIT.CONFLICT,
  INVALID_RUN_ID: EXIT.USAGE,
  INVALID_SIGNAL_NAME: EXIT.USAGE,
  SIGNAL_PAYLOAD_TOO_LARGE: EXIT.USAGE,
  INVALID_STORE_OPTIONS: EXIT.USAGE,
  INVALID_KEY: EXIT.USAGE,
  PIPELINE_NOT_REGISTERED: EXIT.USAGE,
  PIPELINE_DEFINITION: EXIT.USAGE,
};

/** The exit code for an error that ended a command. */
export function exitCodeForError(error: unknown): ExitCode {
  if (error instanceof CliError) return error.exitCode;
  if (error instanceof WaypointError) return BY_CODE[error.code] ?? EXIT.FAILURE;
  return EXIT.FAILURE;
}
