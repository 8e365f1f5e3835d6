import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { Command, CommanderError } from 'commander';
import type { CompactOptions, PruneOptions } from './commands/retention';
import type { ArchiveCliOptions } from './commands/archive';
import type { PruneStreamsOptions } from './commands/prune-streams';
import type { ForkCliOptions, SignalCliOptions } from './commands/runs-control';
import type { ListOptions } from './commands/runs-list';
import type { TailOptions } from './commands/runs-tail';
import type { UiCliOptions } from './commands/ui';
import type { VerifyOptions } from './commands/verify';
import { checkRunId } from '../core/run/run-id';
import { EXIT, exitCodeForError, type ExitCode } from './exit-codes';
import type { CliIo } from './output';
import type { GlobalOptions } from './session';

// Command modules load on first use, so `--help` and usage errors answer without loading the store drivers.
// They are loaded with require(): a dynamic import() would make every command's start asynchronous and go through
// Node's ESM loader for our own CommonJS files.
/* eslint-disable @typescript-eslint/no-require-imports -- lazy, synchronous loads of our own command modules (above) */
const modules = {
  runsList: () => require('./commands/runs-list') as typeof import('./commands/runs-list'),
  runsShow: () => require('./commands/runs-show') as typeof import('./commands/runs-show'),
  runsTail: () => require('./commands/runs-tail') as typeof import('./commands/runs-tail'),
  runsResume: () => require('./commands/runs-resume') as typeof import('./commands/runs-resume'),
  runsControl: () => require('./commands/runs-control') as typeof import('./commands/runs-control'),
  verify: () => require('./commands/verify') as typeof import('./commands/verify'),
  retention: () => require('./commands/retention') as typeof import('./commands/retention'),
  pruneStreams: () => require('./commands/prune-streams') as typeof import('./commands/prune-streams'),
  storeAdmin: () => require('./commands/store-admin') as typeof import('./commands/store-admin'),
  reencrypt: () => require('./commands/reencrypt') as typeof import('./commands/reencrypt'),
  archive: () => require('./commands/archive') as typeof import('./commands/archive'),
  ui: () => require('./commands/ui') as typeof import('./commands/ui'),
};
/* eslint-enable @typescript-eslint/no-require-imports */

const HELP_FOOTER = `
Store (--store or WAYPOINT_STORE; default: sqlite:./.waypoint/waypoint.db, as Waypoint.create's):
  sqlite:./path.db | sqlite:/abs/path.db
  postgres://user:pass@host:5432/db[?schema=name]
  redis://host:6379[?prefix=name]

Module (--module or WAYPOINT_MODULE), a compiled .js (CommonJS or ESM) exporting:
  pipelines                        the @Pipeline classes whose runs may be resumed
  createWaypointOptions(context)   optional: the Waypoint.create options of your workers
                                   (modules binding your services, hmacKey, encryption, ...)

Exit codes:
  0 ok   1 failed   2 usage   3 not found   4 corrupted rows   5 store unavailable
  6 conflict (locked / finished / exists)   75 resumed run paused or waiting

Examples:
  waypoint-durable --store sqlite:./.waypoint/waypoint.db runs list --status running,failed
  waypoint-durable runs show q3-aapl
  waypoint-durable runs tail q3-aapl --from 120
  waypoint-durable runs resume q3-aapl --module ./dist/waypoint.config.js
  waypoint-durable verify --json
  waypoint-durable reencrypt --module ./dist/waypoint.config.js   (after making a new key active)
  waypoint-durable prune --older-than 30d --archive ./archive
  waypoint-durable archive restore q3-aapl --archive 's3://agent-runs/waypoint?storageClass=GLACIER_IR'
  waypoint-durable prune-streams --older-than 7d   (live output of finished runs; the runs stay)
`;

/**
 * The `waypoint` command tree. Each action's exit code lands in `result.exitCode`; errors propagate to
 * the caller (main), which prints them as one line.
 *
 * @example
 * const result = { exitCode: 0 };
 * await buildProgram(io, result).parseAsync(['runs', 'list'], { from: 'user' });
 */
export function buildProgram(io: CliIo, result: { exitCode: ExitCode }): Command {
  const program = new Command('waypoint-durable')
    .description('Inspect, resume and maintain Waypoint runs: crash-safe, resumable multi-agent pipelines.')
    .version(packageVersion(), '-V, --version')
    .option('--store <url>', 'checkpoint store URL (default: $WAYPOINT_STORE, else sqlite:./.waypoint/waypoint.db)')
    .option('--module <path>', 'your pipeline module (default: $WAYPOINT_MODULE)')
    .option('--json', 'machine-readable JSON on stdout')
    .option('--no-progress', 'no progress display on stderr')
    .option('--verbose', 'stack traces on errors, info-level runtime logs')
    .showHelpAfterError('(waypoint-durable --help for usage)')
    .exitOverride()
    .configureOutput({
      writeOut: (text) => io.out(text),
      writeErr: (text) => io.err(text),
      outputError: (text, write) => write(`waypoint: ${text.replace(/^error: /, '')}`),
    })
    .addHelpText('after', HELP_FOOTER);

  const act: Act =
    <A extends unknown[]>(fn: (globals: GlobalOptions, ...args: A) => Promise<ExitCode>) =>
    async (...args: A) => {
      const command = args[args.length - 1] as Command;
      result.exitCode = await fn(command.optsWithGlobals<GlobalOptions>(), ...args);
    };

  addRunCommands(program, act, io);
  addMaintenanceCommands(program, act, io);
  addAdminCommands(program, act, io);
  return program;
}

/** Wraps a command's action so its exit code lands in the result (see `buildProgram`). */
type Act = <A extends unknown[]>(fn: (globals: GlobalOptions, ...args: A) => Promise<ExitCode>) => (...args: A) => Promise<void>;

/** `runs list | show | resume | cancel | signal | fork`: one run at a time, or a listing of them. */
function addRunCommands(program: Command, act: Act, io: CliIo): void {
  const runs = program.command('runs').description('list, inspect, resume, cancel, signal and fork runs');
  runs
    .command('list')
    .description('stored runs, most recently updated first')
    .option('--status <list>', 'only these statuses (comma-separated: running,paused,waiting,completed,failed,cancelled)')
    .option('--pipeline <name>', 'only runs of this pipeline')
    .option('--since <when>', 'only runs updated since a duration ago (2h, 7d) or a date (2026-01-18)')
    .option('--stale', 'only running runs whose worker is gone (no live lease)')
    .option('--limit <n>', 'at most this many runs', '50')
    .option('--parent <runId>', 'only the child runs of this run (the items of its forEach over a pipeline, or of a distributed forEach)')
    .option('--all', 'also the item runs of forEach(..., { distribute: true }) bodies, which are listed under their parent otherwise')
    .action(act((g, options: ListOptions) => modules.runsList().runsList(g, options, io)));
  runs
    .command('show <runId>')
    .description('the run and its step timeline: durations, attempts, side effects, resumes, integrity')
    .option('--gap-ms <ms>', 'a pause between checkpoints longer than this counts as a resume (default: adaptive, >= 100)')
    .option('--items <n|all>', 'forEach items listed one by one in the tree of a control-flow run (default 3, plus failed and unfinished ones)')
    .action(act((g, runId: string, options: { gapMs?: string; items?: string }) => modules.runsShow().runsShow(g, checkRunId(runId), options, io)));
  runs
    .command('tail <runId>')
    .description("follow the run's live output (text joined, retractions and status changes shown) until the run ends")
    .option('--from <n>', 'start at this stream offset (after a disconnect: the last offset seen + 1)', '0')
    .option('--no-follow', 'print what is stored now and stop')
    .action(act((g, runId: string, options: TailOptions) => modules.runsTail().runsTail(g, checkRunId(runId), options, io)));
  runs
    .command('resume <runId>')
    .description('continue a run in this process with the pipelines of --module (SIGINT/SIGTERM pause it cleanly)')
    .option('--wait <duration>', "wait this long for another worker's lease instead of failing (e.g. 30s)")
    .option('--grace <duration>', 'on SIGINT/SIGTERM, how long the running step may take to finish (default 10s)')
    .action(act((g, runId: string, options: { wait?: string; grace?: string }) => modules.runsResume().runsResume(g, checkRunId(runId), options, io)));
  runs
    .command('cancel <runId>')
    .description('cancel a run and fence out its executor, wherever it runs')
    .option('--reason <text>', 'recorded in the run')
    .action(act((g, runId: string, options: { reason?: string }) => modules.runsControl().runsCancel(g, checkRunId(runId), options, io)));
  runs
    .command('signal <runId> <name>')
    .description('deliver a signal to a run waiting on ctx.waitFor(name); first delivery wins')
    .option('--payload <json>', 'the signal payload, as JSON (default: none)')
    .option('--payload-file <path>', 'read the payload (JSON) from this file instead')
    .action(act((g, runId: string, name: string, options: SignalCliOptions) => modules.runsControl().runsSignal(g, checkRunId(runId), name, options, io)));
  runs
    .command('fork <runId>')
    .description('a new paused run with the checkpoints before a step (time travel)')
    .option('--from <step>', 'run again from this step: agentId/stepName, or a unique step name')
    .option('--from-sequence <n>', 'keep checkpoints 1..n')
    .option('--new-id <id>', 'id of the new run (default: <runId>-fork-<time>)')
    .option('--patch <json>', 'shallow changes to the shared state, as a JSON object')
    .option('--patch-before <path>', 'with control flow: the path of the step the patch applies before (default: --from, else the next recorded step)')
    .action(act((g, runId: string, options: ForkCliOptions) => modules.runsControl().runsFork(g, checkRunId(runId), checkForkId(options), io)));
}

/** `verify`, `prune`, `compact` and `reencrypt`: integrity, retention and key rotation over many runs. */
function addMaintenanceCommands(program: Command, act: Act, io: CliIo): void {
  program
    .command('verify [runIds...]')
    .description('check every checkpoint row (digest / HMAC, gaps); exit 4 when any is corrupted')
    .option('--status <list>', 'only runs with these statuses')
    .option('--pipeline <name>', 'only runs of this pipeline')
    .action(
      act((g, runIds: string[], options: VerifyOptions) =>
        modules.verify().verify(
          g,
          runIds.map((id) => checkRunId(id)),
          options,
          io,
        ),
      ),
    );
  program
    .command('prune')
    .description('delete finished runs not updated for a while (retention)')
    .requiredOption('--older-than <duration>', 'e.g. 30d, 12h')
    .option('--status <list>', 'statuses to prune (default completed,cancelled,failed)')
    .option('--archive <dir|s3://bucket/prefix>', "archive the run row, rows and operations there first (default: --module's retention.archive)")
    .option('--dry-run', 'list what would be pruned, delete nothing')
    .action(act((g, options: PruneOptions) => modules.retention().prune(g, options, io)));
  program
    .command('compact [runIds...]')
    .description('fold old checkpoints of runs into base snapshots (retention)')
    .option('--keep-last <n>', 'checkpoints kept as rows per run', '10')
    .option('--archive <dir|s3://bucket/prefix>', "archive folded rows there first (default: --module's retention.archive)")
    .option('--status <list>', 'runs with these statuses (default: all but running)')
    .action(
      act((g, runIds: string[], options: CompactOptions) =>
        modules.retention().compact(
          g,
          runIds.map((id) => checkRunId(id)),
          options,
          io,
        ),
      ),
    );
  addArchiveCommands(program, act, io);
  addPruneStreams(program, act, io);
  program
    .command('reencrypt [runIds...]')
    .description("rewrite encrypted payloads under the active key of --module's encryption (key rotation); exit 4 when a value cannot be opened")
    .action(
      act((g, runIds: string[]) =>
        modules.reencrypt().reencrypt(
          g,
          runIds.map((id) => checkRunId(id)),
          io,
        ),
      ),
    );
}

/** `prune-streams`: live output of finished runs dropped, the runs kept. */
function addPruneStreams(program: Command, act: Act, io: CliIo): void {
  program
    .command('prune-streams')
    .description('drop the live-output streams of completed and cancelled runs not updated for a while; the runs stay')
    .requiredOption('--older-than <duration>', 'e.g. 7d, 12h')
    .option('--status <list>', 'completed, cancelled or both (default both)')
    .option('--dry-run', 'list the streams that would be dropped, drop nothing')
    .action(act((g, options: PruneStreamsOptions) => modules.pruneStreams().pruneStreams(g, options, io)));
}

/** `archive list | restore`: what retention archived, and bringing a pruned run back. */
function addArchiveCommands(program: Command, act: Act, io: CliIo): void {
  const archive = program.command('archive').description("list and restore what retention archived (--archive, else --module's retention.archive)");
  archive
    .command('list [runId]')
    .description("the runs with something archived, or one run's archive objects")
    .option('--archive <dir|s3://bucket/prefix>', "the archive (default: the module's retention.archive)")
    .action(act((g, runId: string | undefined, options: ArchiveCliOptions) => modules.archive().archiveList(g, runId === undefined ? undefined : checkRunId(runId), options, io)));
  archive
    .command('restore <runId>')
    .description("bring a pruned run (or a compacted run's folded rows) back into the store, every row checked first")
    .option('--archive <dir|s3://bucket/prefix>', "the archive (default: the module's retention.archive)")
    .action(act((g, runId: string, options: ArchiveCliOptions) => modules.archive().archiveRestore(g, checkRunId(runId), options, io)));
}

/** `migrate`, `stats` and `ui`: the store's schema, its counts, the timeline page. */
function addAdminCommands(program: Command, act: Act, io: CliIo): void {
  program
    .command('migrate')
    .description('create the store or apply pending schema migrations')
    .action(act((g) => modules.storeAdmin().migrate(g, io)));
  program
    .command('stats')
    .description('runs by status and pipeline, stale runs, checkpoints stored')
    .action(act((g) => modules.storeAdmin().stats(g, io)));
  program
    .command('ui')
    .description('serve the run timeline page (127.0.0.1 by default) until Ctrl-C')
    .option('--port <n>', 'TCP port (0 picks a free one)', '4317')
    .option('--host <address>', 'address to bind; anything but loopback needs --token', '127.0.0.1')
    .option('--token <token>', 'bearer token required for every request (default: $WAYPOINT_UI_TOKEN)')
    .option('--allow-actions', 'enable resume, cancel and fork from the page')
    .action(act((g, options: UiCliOptions) => modules.ui().ui(g, options, io)));
}

/**
 * Runs the command line `args` (without `node` and the script) and returns the exit code. Every error
 * is one line on stderr, `waypoint: <message>`, with the stack under `--verbose`.
 *
 * @example
 * process.exitCode = await runCli(process.argv.slice(2), processIo());
 */
export async function runCli(args: string[], io: CliIo): Promise<ExitCode> {
  const result: { exitCode: ExitCode } = { exitCode: EXIT.OK };
  const program = buildProgram(io, result);
  try {
    await program.parseAsync(args, { from: 'user' });
    return result.exitCode;
  } catch (error) {
    if (error instanceof CommanderError) {
      // Commander already printed its message (or the help / version).
      return error.exitCode === 0 || error.code === 'commander.helpDisplayed' || error.code === 'commander.version' ? EXIT.OK : EXIT.USAGE;
    }
    const verbose = program.opts<GlobalOptions>().verbose === true || args.includes('--verbose');
    const message = error instanceof Error ? error.message : String(error);
    io.err(`waypoint: ${message.replace(/\s+/g, ' ').trim()}\n`);
    if (verbose && error instanceof Error && error.stack) io.err(`${error.stack}\n${causeChain(error)}`);
    return exitCodeForError(error);
  }
}

/** The package's version, from the package.json three levels up (<outDir>/src/cli -> package root). */
function packageVersion(): string {
  try {
    return (JSON.parse(readFileSync(join(__dirname, '..', '..', '..', 'package.json'), 'utf8')) as { version: string }).version;
  } catch {
    return 'unknown';
  }
}

function causeChain(error: Error): string {
  let text = '';
  for (let cause = error.cause; cause instanceof Error; cause = cause.cause) text += `caused by: ${cause.stack ?? cause.message}\n`;
  return text;
}

/** `--new-id`, when given, follows the run id rule like every other id (checked before a store is opened). */
function checkForkId(options: ForkCliOptions): ForkCliOptions {
  if (options.newId !== undefined) checkRunId(options.newId, '--new-id');
  return options;
}
