import 'reflect-metadata';
import { BenchEnvironment, machineLine, type Backend } from './environment';
import { PgStatementCounter } from './instruments';
import { renderText, section, type Section } from './report';
import { sequentialFigures } from './sequential';
import { storageFigures } from './storage-growth';
import { concurrencyFigure } from './concurrency';
import { heapFigure, runHeapChild } from './heap';
import { integrityFigure } from './integrity';
import { telemetryFigure } from './telemetry-cost';
import { profileReport, runProfileChild } from './profile';
import { startupFigure } from './startup';
import { aiOverheadFigure } from './ai-overhead';
import { realisticFiguresIsolated, runRealisticGroupChild, runRealisticProfileChild } from './realistic';
import { flowFigures } from './flow';
import { liveOutputFigures } from './live-output';
import { liveOutputFigure } from './live-throughput';
import { quietStepFigure } from './live-quiet';
import { longConversationFigure, runLongConversationChild } from './long-conversation';

/**
 * `npm run bench`: every performance figure of the design and issue 10, each beside a floor measured in
 * this same run, as ratios (never as absolute timings to assert). Prints a table; `--json` prints the
 * figures as one JSON document instead. Progress goes to stderr.
 *
 * Options:
 *   --json                 machine output on stdout
 *   --only a,b             figure groups: sequential, realistic (issue 22: the realistic pipeline, CPU per step, growth, profile; in a child process), storage, concurrency, flow (issue 20: control flow), heap, integrity, telemetry, startup, ai, live-output (issue 37: append to a reader in another process, bytes per part) , live-throughput (issue 37: parts per second through ctx.emit), live-quiet (issue 37: a step that emits nothing, streams available vs. hidden), long-conversation (issue 40: a 100-call tool loop on PostgreSQL: bytes per call, resume) (default),
 *                          profile (opt-in), fleet (a short round by default)
 *   --backends a,b         backends of the sequential figure (memory, sqlite, postgres, redis, tiered)
 *   --quick                fewer rounds and steps (a smoke run, not for quoting)
 *   --profile              also profile the step loop (V8 CPU profiler; memory and PostgreSQL) and list the top costs
 *   --fanout               the fan-out group (opt-in; with --quick: 200 children, one round)
 *   --only long-runs       issue 40: resume time at 1k / 10k / 20k recorded steps, loop heap per iteration (opt-in, a few minutes)
 *   --fleet                the full fleet measurement (3 rounds of 120 runs per worker count) instead of one short round
 *
 * @example
 * npm run bench -- --json > bench.json
 */

const GROUPS = [
  'sequential',
  'realistic',
  'storage',
  'concurrency',
  'flow',
  'heap',
  'integrity',
  'telemetry',
  'startup',
  'ai',
  'live-output',
  'live-throughput',
  'live-quiet',
  'long-conversation',
  'profile',
  'fleet',
  'fanout',
  'long-runs',
] as const;
type Group = (typeof GROUPS)[number];
/**
 * Opt-in groups, to keep the default run under ~3 minutes: `profile` (`--profile`, about a minute) and
 * `fleet` (worker processes draining a pg-boss queue, bench/fleet.ts): one short round by default, the full one with --fleet;
 * `fanout` (issue 21, bench/fanout.ts: 1,000 child runs of one parent vs 1,000 independent runs over 3 worker processes, a few minutes): `--fanout`.
 */
const DEFAULT_GROUPS = GROUPS.filter((g) => g !== 'profile' && g !== 'fanout' && g !== 'long-runs');

interface Args {
  json: boolean;
  only: Set<Group>;
  backends: Backend[];
  quick: boolean;
  fullFleet: boolean;
}

function parseArgs(argv: string[]): Args {
  const args: Args = { json: false, only: new Set(DEFAULT_GROUPS), backends: ['postgres', 'sqlite', 'redis', 'tiered', 'memory'], quick: false, fullFleet: false };
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i];
    const value = () => {
      const v = arg.includes('=') ? arg.slice(arg.indexOf('=') + 1) : argv[++i];
      if (!v) throw new Error(`${arg} needs a value`);
      return v
        .split(',')
        .map((s) => s.trim())
        .filter(Boolean);
    };
    if (arg === '--json') args.json = true;
    else if (arg === '--quick') args.quick = true;
    else if (arg === '--profile') args.only.add('profile');
    else if (arg === '--fanout') args.only.add('fanout');
    else if (arg === '--fleet') {
      args.only.add('fleet');
      args.fullFleet = true;
    } else if (arg.startsWith('--only')) args.only = new Set(value().map((g) => check(g, GROUPS, '--only')));
    else if (arg.startsWith('--backends')) args.backends = value().map((b) => check(b, ['memory', 'sqlite', 'postgres', 'redis', 'tiered'] as const, '--backends'));
    else throw new Error(`unknown option ${arg} (see bench/index.ts for the options)`);
  }
  return args;
}

function check<T extends string>(value: string, allowed: readonly T[], option: string): T {
  if (!(allowed as readonly string[]).includes(value)) throw new Error(`${option}: '${value}' is not one of ${allowed.join(', ')}`);
  return value as T;
}

async function main(argv: string[]): Promise<void> {
  if (argv[0] === '--child') {
    // A child task spawned by this file (heap: with --expose-gc; profile: under the inspector CPU profiler): prints one JSON line.
    const task = argv[1];
    const result =
      task === 'heap'
        ? await runHeapChild(argv.slice(2))
        : task === 'profile'
          ? await runProfileChild(argv.slice(2))
          : task === 'realistic-profile'
            ? await runRealisticProfileChild(argv.slice(2))
            : task === 'long-conversation'
              ? await runLongConversationChild(argv.slice(2))
              : task === 'realistic-group'
                ? await runRealisticGroupChild(argv.slice(2), (line) => process.stderr.write(`bench [child] ${line}\n`))
                : null;
    if (result === null) throw new Error(`unknown child task '${task}'`);
    process.stdout.write(JSON.stringify(result) + '\n');
    return;
  }
  const args = parseArgs(argv);
  const started = performance.now();
  const progress = (line: string) => process.stderr.write(`bench [${((performance.now() - started) / 1000).toFixed(0).padStart(3)} s] ${line}\n`);
  const env = new BenchEnvironment();
  const pg = PgStatementCounter.install();
  const sections: Section[] = [];
  let interrupted = false;
  const onSignal = () => {
    interrupted = true;
    progress('interrupted: cleaning up');
    void env.cleanup().finally(() => process.exit(130));
  };
  process.once('SIGINT', onSignal);
  process.once('SIGTERM', onSignal);
  try {
    await env.sweepStale().catch((e) => progress(`could not sweep stale bench schemas: ${String(e)}`));
    const q = args.quick;
    // A group that fails (a server down, a bug) is reported as such; the others still run.
    const group = async (name: Group, run: () => Section | Section[] | Promise<Section | Section[]>) => {
      if (!args.only.has(name)) return;
      try {
        sections.push(...[await run()].flat());
      } catch (error) {
        const failed = section(name, `${name}: FAILED`, String(error instanceof Error ? error.message : error), []);
        sections.push(failed);
        process.exitCode = 1;
        progress(`${name} failed: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}`);
      }
    };
    // First: each sample is a new process timed from its start, against an absolute target (floor + 60 ms), so
    // it runs before the other groups leave open Waypoints (lease heartbeats) and a busy PostgreSQL behind them.
    await group('startup', () => startupFigure({ quick: q, pg: { url: env.pgUrl, schema: env.pgSchema('startup') } }, progress));
    await group('sequential', async () => {
      const short = q ? 60 : 100; // short samples, many rounds: floor and figure alternate every ~100 ms
      const config = { rounds: q ? 3 : 11, payloadBytes: 1000, steps: { postgres: short, sqlite: short, redis: short, tiered: short, memory: q ? 300 : 2000 } };
      const r = await sequentialFigures(env, args.backends, config, pg, progress);
      return [r.cost, r.trips];
    });
    // In a process of its own: the runtime's per-step figures, independent of the groups run before them.
    await group('realistic', () => realisticFiguresIsolated({ quick: q }));
    await group('storage', () => storageFigures(env, { quick: q }, pg, progress));
    await group('concurrency', () => concurrencyFigure(env, { quick: q }, progress));
    await group('flow', () => flowFigures(env, { quick: q }, pg, progress));
    await group('heap', () => heapFigure({ quick: q }, progress));
    await group('integrity', () => integrityFigure(env, { quick: q }, progress));
    await group('telemetry', () => telemetryFigure(env, { quick: q }, progress));
    await group('ai', () => aiOverheadFigure(env, { quick: q }, progress));
    await group('live-output', () => liveOutputFigures(env, { quick: q }, progress));
    await group('live-throughput', () => liveOutputFigure(env, { quick: q }, progress));
    await group('live-quiet', () => quietStepFigure(env, { quick: q }, progress));
    await group('long-conversation', () => longConversationFigure(env, { quick: q }, progress));
    await group('profile', () => profileReport({ quick: q }, progress));
    // Loaded only when asked for: it pulls in the queue (pg-boss) and spawns worker processes.
    await group('fleet', async () => (await import('./fleet.js')).runFleetBench({ quick: q || !args.fullFleet, progress }));
    await group('fanout', async () => (await import('./fanout.js')).runFanOutBench({ quick: q, progress }));
    await group('long-runs', async () => (await import('./long-runs.js')).longRunsFigure(env, { quick: q }, progress));
  } finally {
    await env.cleanup();
    process.removeListener('SIGINT', onSignal);
    process.removeListener('SIGTERM', onSignal);
  }
  if (interrupted) return;
  const seconds = (performance.now() - started) / 1000;
  const header = [
    `Waypoint bench — ${new Date().toISOString()}${args.quick ? ' (--quick: smoke run, do not quote)' : ''}`,
    machineLine(env),
    `Every figure is a median over repetitions with (min–max); floors are measured in this run, interleaved with the figure. Took ${seconds.toFixed(0)} s.`,
  ];
  if (args.json) {
    process.stdout.write(
      JSON.stringify(
        { header, seconds, sections: sections.map(({ id, title, method, columns, rows, notes, figures }) => ({ id, title, method, columns, rows, notes, figures })) },
        null,
        2,
      ) + '\n',
    );
  } else {
    process.stdout.write(renderText(sections, header) + '\n');
  }
}

main(process.argv.slice(2)).then(
  () => process.exit(process.exitCode ?? 0),
  (error: unknown) => {
    process.stderr.write(`bench failed: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
    process.exit(1);
  },
);
