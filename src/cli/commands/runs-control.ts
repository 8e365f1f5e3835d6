import { readFileSync } from 'node:fs';
import { checkSignalName } from '../../contract/signal-rules';
import type { ForkOptions } from '../../core/history/fork';
import { parseCount } from '../durations';
import { reasonOf } from '../../contract/errors';
import { EXIT, usageError, type ExitCode, runNotFound } from '../exit-codes';
import { printJson, type CliIo } from '../output';
import { openSession, type GlobalOptions } from '../session';

/**
 * `waypoint-durable runs cancel <id>`: marks the run cancelled and fences out its executor, wherever it runs
 * (it stops at its next checkpoint write or lease renewal). Exit 6 when the run completed; a cancelled
 * run is left as it is (exit 0).
 */
export async function runsCancel(globals: GlobalOptions, runId: string, options: { reason?: string }, io: CliIo): Promise<ExitCode> {
  const session = await openSession(globals, io, { command: 'runs cancel' });
  try {
    const before = await session.waypoint.store.getRun(runId);
    if (!before) throw runNotFound(runId, session.storeDisplay);
    if (before.status === 'cancelled') {
      // Cancelling is idempotent: a retried script must not fail because its first attempt went through.
      if (globals.json) printJson(io, await session.waypoint.get(runId));
      else io.out(`Run ${runId} was already cancelled; nothing to do.\n`);
      return EXIT.OK;
    }
    const info = await session.waypoint.cancel(runId, options.reason ?? 'cancelled with the waypoint CLI');
    if (globals.json) printJson(io, info);
    else {
      const live = before.status === 'running' && before.leaseOwner !== null && before.leaseExpiresAt !== null && before.leaseExpiresAt > new Date();
      io.out(
        `Run ${runId} cancelled (was ${before.status} at sequence ${before.lastSequence}).` +
          (live ? ` Its executor ${before.leaseOwner} is fenced out and stops at its next checkpoint write or lease renewal.` : '') +
          ` To continue from its checkpoints, fork it: waypoint-durable runs fork ${runId}\n`,
      );
    }
    return EXIT.OK;
  } finally {
    await session.close();
  }
}

export interface SignalCliOptions {
  payload?: string;
  /** A JSON file: for payloads too large for a command-line argument (about 128 KiB on Linux). */
  payloadFile?: string;
}

/**
 * `waypoint-durable runs signal <id> <name> [--payload <json>]`: delivers signal `name` to the run (a step
 * waiting on `ctx.waitFor(name)` gets it when the run resumes). The name and payload are checked before the
 * store is opened: an invalid name or a payload over the limit exits 2 with nothing stored. A signal
 * delivered before is left as it was (first delivery wins), exit 0.
 */

export async function runsSignal(globals: GlobalOptions, runId: string, name: string, options: SignalCliOptions, io: CliIo): Promise<ExitCode> {
  checkSignalName(name, { runId });
  if (options.payload !== undefined && options.payloadFile !== undefined) throw usageError('Give --payload <json> or --payload-file <path>, not both.');
  const payload =
    options.payloadFile !== undefined
      ? readPayloadFile(options.payloadFile)
      : options.payload === undefined
        ? undefined
        : parseJson(options.payload, '--payload', `'{"approved":true}'`);
  const session = await openSession(globals, io, { command: 'runs signal' });
  try {
    // signal() checks the payload's size before it reads the run: an oversized payload exits 2, an unknown run 3.
    const delivered = await session.waypoint.signal(runId, name, payload);
    if (globals.json) printJson(io, { runId, name, delivered });
    else if (delivered) io.out(`Signal '${name}' delivered to run ${runId}. Resume the run to let its waiting step continue.\n`);
    else io.out(`Signal '${name}' had already been delivered to run ${runId}; the first delivery's payload is kept, nothing changed.\n`);
    return EXIT.OK;
  } finally {
    await session.close();
  }
}

export interface ForkCliOptions {
  from?: string;
  fromSequence?: string;
  newId?: string;
  patch?: string;
  patchBefore?: string;
}

/**
 * `waypoint-durable runs fork <id> [--from <step> | --from-sequence <n>] [--new-id <id>] [--patch <json>]`: a new,
 * paused run with the source's checkpoints before that point (all of them by default).
 */
export async function runsFork(globals: GlobalOptions, runId: string, options: ForkCliOptions, io: CliIo): Promise<ExitCode> {
  if (options.from !== undefined && options.fromSequence !== undefined) throw usageError('Give --from <step> or --from-sequence <n>, not both.');
  const fork: ForkOptions = { newRunId: options.newId ?? defaultForkId(runId, new Date()) };
  if (options.from !== undefined) fork.fromStep = options.from;
  if (options.fromSequence !== undefined) fork.fromSequence = parseCount(options.fromSequence, '--from-sequence', 0);
  if (options.patch !== undefined) fork.patchState = parsePatch(options.patch);
  if (options.patchBefore !== undefined) {
    if (options.patch === undefined) throw usageError('--patch-before needs --patch: give the patch to apply before that step as well.');
    fork.patchBefore = options.patchBefore;
  }
  const session = await openSession(globals, io, { command: 'runs fork' });
  try {
    if (!(await session.waypoint.store.getRun(runId))) throw runNotFound(runId, session.storeDisplay);
    const info = await session.waypoint.fork(runId, fork);
    if (globals.json) printJson(io, info);
    else {
      io.out(
        `Forked ${runId} into ${info.runId}: ${info.lastSequence} checkpoint(s) copied${fork.patchState ? ' plus the state patch' : ''}, status ${info.status}.\n` +
          `Continue it with: waypoint-durable runs resume ${info.runId} --module <your pipeline module>\n`,
      );
    }
    return EXIT.OK;
  } finally {
    await session.close();
  }
}

/** `q3-aapl-fork-20260118T124540Z`: unique enough for a person forking by hand, and sortable. */
export function defaultForkId(runId: string, now: Date): string {
  return `${runId}-fork-${now.toISOString().replace(/[-:]/g, '').replace(/\.\d+/, '')}`;
}

function parseJson(text: string, flag: string, example: string): unknown {
  try {
    return JSON.parse(text);
  } catch (error) {
    throw usageError(`${flag} is not valid JSON (${reasonOf(error)}): give JSON, e.g. ${example}.`);
  }
}

function readPayloadFile(file: string): unknown {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (error) {
    throw usageError(`Cannot read --payload-file '${file}': ${reasonOf(error)}. Check the path and that the file is readable.`);
  }
  return parseJson(text, '--payload-file', 'a file holding {"approved":true}');
}

function parsePatch(text: string): Record<string, unknown> {
  const value = parseJson(text, '--patch', `'{"strict":true}'`);
  if (typeof value !== 'object' || value === null || Array.isArray(value)) throw usageError(`--patch must be a JSON object, e.g. '{"strict":true}'.`);
  return value as Record<string, unknown>;
}
