/**
 * `npm run crash-test -- --runs 500 --seed 7`: the long crash-kill series. Runs the effects pipeline in
 * child processes on SQLite and PostgreSQL, kills them with SIGKILL at every named fault point and at
 * seeded random points (counted points, delays, named points), resumes each run until it completes, and
 * checks every guarantee (test/crash/effects-verify.ts). Prints runs, kills, resumes, lost steps,
 * duplicate transactional effects and external repeats by cause; exits 1 on any violation.
 *
 * Options: --runs N (random runs, split over the backends; default 100), --seed S (default 7),
 * --backend sqlite|postgres|both (default both), --jobs J (children at a time; default 2),
 * --max-kills K (kills drawn per run, 1..K; default 3), --no-named (skip the named fault points),
 * --verbose (one line per run).
 *
 * --pipeline effects|flow|both (default effects; flow or both runs the control-flow pipeline (parallel, loop,
 * branch, forEach over an agent and over a child pipeline, when, a reducer; test/crash/flow-*.ts):
 * --flow-runs N trials (split over the backends; default 10), each killed with SIGKILL at 2..max(2, K)
 * seeded random delays and resumed in a new process until it completes, then checked (flow-verify.ts).
 * A failed trial prints its seed, kill delays and where each kill landed.
 *
 * --durability sync|async (default sync): the workers' durability mode. With async, a step's row is written
 * while the next step runs; the checks are the same (no effect twice, no lost step that was reported, final
 * state equal to the uncrashed run's, rows contiguous).
 */
import 'reflect-metadata';
import { parseArgs } from 'node:util';
import { killLiveChildren } from '../helpers/child-process';
import { POSTGRES_EFFECTS, SQLITE_EFFECTS } from './effects-backends';
import { EffectsBench, namedCases, runSeries, type EffectsBackend } from './effects-harness';
import { addReport, emptyTotals, mergeTotals, type RunLog, type RunReport, type Totals } from './effects-verify';
import { FlowBench, describeTrial, runFlowSeries } from './flow-harness';
import { inPool } from './harness';

interface Options {
  runs: number;
  seed: number;
  backends: EffectsBackend[];
  jobs: number;
  maxKills: number;
  named: boolean;
  verbose: boolean;
  effects: boolean;
  flow: boolean;
  flowRuns: number;
}

function options(argv: string[]): Options {
  const { values } = parseArgs({
    args: argv,
    options: {
      runs: { type: 'string', default: '100' },
      seed: { type: 'string', default: '7' },
      backend: { type: 'string', default: 'both' },
      jobs: { type: 'string', default: '2' },
      'max-kills': { type: 'string', default: '3' },
      'no-named': { type: 'boolean', default: false },
      verbose: { type: 'boolean', default: false },
      pipeline: { type: 'string', default: 'effects' },
      'flow-runs': { type: 'string', default: '10' },
      durability: { type: 'string', default: 'sync' },
    },
  });
  const int = (name: string, text: string, min: number) => {
    const n = Number(text);
    if (!Number.isInteger(n) || n < min) throw new Error(`--${name} must be an integer >= ${min}, got '${text}'`);
    return n;
  };
  const backends = { sqlite: [SQLITE_EFFECTS], postgres: [POSTGRES_EFFECTS], both: [SQLITE_EFFECTS, POSTGRES_EFFECTS] }[values.backend];
  if (!backends) throw new Error(`--backend must be sqlite, postgres or both, got '${values.backend}'`);
  if (values.durability !== 'sync' && values.durability !== 'async') throw new Error(`--durability must be sync or async, got '${values.durability}'`);
  // The workers (child processes) read it from their environment.
  process.env.WAYPOINT_CRASH_DURABILITY = values.durability;
  if (!['effects', 'flow', 'both'].includes(values.pipeline)) throw new Error(`--pipeline must be effects, flow or both, got '${values.pipeline}'`);
  return {
    runs: int('runs', values.runs, 0),
    seed: int('seed', values.seed, 0),
    backends,
    jobs: int('jobs', values.jobs, 1),
    maxKills: int('max-kills', values['max-kills'], 1),
    named: !values['no-named'],
    verbose: values.verbose,
    effects: values.pipeline !== 'flow',
    flow: values.pipeline !== 'effects',
    flowRuns: int('flow-runs', values['flow-runs'], 0),
  };
}

/** Kills by how they were planned (counted point, delay, named fault point). */
type ByKind = Record<'tick' | 'time' | 'fault', number>;

function countKills(log: RunLog, into: ByKind): void {
  for (const p of log.processes) if (p.killed && p.kill) into[p.kill.split(':')[0] as keyof ByKind] += 1;
}

function line(label: string, totals: Totals, kinds: ByKind): string {
  const repeats = totals.externalRepeats;
  return (
    `${label.padEnd(11)} runs ${totals.runs}, processes ${totals.processes}, kills ${totals.kills} ` +
    `(counted points ${kinds.tick}, delays ${kinds.time}, named points ${kinds.fault}), resumes ${totals.resumes}; ` +
    `lost steps ${totals.lostSteps}, duplicate transactional effects ${totals.duplicateTransactional}, ` +
    `external repeats ${repeats.betweenEffectAndRecord + repeats.other}, violations ${totals.violations.length}`
  );
}

async function main(): Promise<number> {
  const opts = options(process.argv.slice(2));
  const started = performance.now();
  const effectsCode = opts.effects ? await effectsSeries(opts) : 0;
  const flowCode = opts.flow ? await flowSeries(opts) : 0;
  console.log(`duration: ${((performance.now() - started) / 1000).toFixed(0)} s`);
  return Math.max(effectsCode, flowCode);
}

/** The effects pipeline's series (named fault points and random kills). */
async function effectsSeries(opts: Options): Promise<number> {
  const overall = emptyTotals();
  const overallKinds: ByKind = { tick: 0, time: 0, fault: 0 };
  console.log(
    `crash-test (durability ${process.env.WAYPOINT_CRASH_DURABILITY}): seed ${opts.seed}, ${opts.runs} random runs over ${opts.backends.map((b) => b.name).join(' and ')}` +
      `${opts.named ? ' plus every named fault point' : ''}, 1..${opts.maxKills} kills per run, ${opts.jobs} at a time`,
  );
  for (const [index, backend] of opts.backends.entries()) {
    const runs = Math.floor(opts.runs / opts.backends.length) + (index < opts.runs % opts.backends.length ? 1 : 0);
    const bench = await EffectsBench.open(backend, `crash-test-cli ${backend.name} seed ${opts.seed}`);
    const totals = emptyTotals();
    const kinds: ByKind = { tick: 0, time: 0, fault: 0 };
    let done = 0;
    let violations = 0;
    const record = (report: RunReport, log: RunLog) => {
      countKills(log, kinds);
      done += 1;
      violations += report.violations.length;
      if (done % 25 === 0) console.log(`  ${backend.name}: ${done} runs checked, ${Object.values(kinds).reduce((a, b) => a + b, 0)} kills, ${violations} violations so far`);
      if (opts.verbose || report.violations.length > 0) {
        console.log(`  ${report.runId}: ${log.processes.map((p) => (p.killed ? `killed(${p.kill})` : p.code === 0 ? 'completed' : `failed(${p.code})`)).join(' -> ')}`);
        for (const v of report.violations) console.log(`    VIOLATION ${v}`);
      }
    };
    try {
      if (opts.named) {
        await inPool(namedCases('all'), opts.jobs, async (named) => {
          const log = await bench.execute(`named-${opts.seed}-${named.spec.replace('@', '-')}`, [{ kind: 'fault', spec: named.spec }]);
          const report = await bench.verify(log);
          if (report.externalRepeats.betweenEffectAndRecord !== named.externalRepeats) {
            report.violations.push(`${report.runId}: ${report.externalRepeats.betweenEffectAndRecord} external repeats, expected ${named.externalRepeats}`);
          }
          if (!log.processes[0]?.killed) report.violations.push(`${report.runId}: ${named.spec} did not kill the worker`);
          addReport(totals, report);
          record(report, log);
        });
      }
      const random = await runSeries(bench, { runs, seed: opts.seed + index, maxKills: opts.maxKills, jobs: opts.jobs, prefix: 'cli', onReport: record });
      mergeTotals(totals, random);
    } finally {
      await killLiveChildren();
      await bench.close();
    }
    console.log(line(backend.name, totals, kinds));
    mergeTotals(overall, totals);
    for (const k of Object.keys(kinds) as (keyof ByKind)[]) overallKinds[k] += kinds[k];
  }
  const r = overall.externalRepeats;
  console.log(line('total', overall, overallKinds));
  console.log(`lost steps: ${overall.lostSteps}`);
  console.log(`steps re-run after their checkpoint was durable: ${overall.rerunSteps}`);
  console.log(`duplicate transactional effects: ${overall.duplicateTransactional} (never applied: ${overall.missingTransactional})`);
  console.log(
    `external repeats (always with the same key): ${r.betweenEffectAndRecord + r.other} = kill between effect and record ${r.betweenEffectAndRecord} + other causes ${r.other}`,
  );
  console.log(
    `reconcile hook: ${overall.reconciled.found + overall.reconciled.notFound} unknown outcomes resolved without a repeat (${overall.reconciled.found} had happened, ${overall.reconciled.notFound} had not)`,
  );
  console.log(`violations: ${overall.violations.length}`);
  for (const v of overall.violations.slice(0, 50)) console.log(`  ${v}`);
  return overall.violations.length === 0 ? 0 : 1;
}

/** The control-flow pipeline's series: seeded trials, several kills each, checked after completion. */
async function flowSeries(opts: Options): Promise<number> {
  console.log(
    `crash-test flow: seed ${opts.seed}, ${opts.flowRuns} trials over ${opts.backends.map((b) => b.name).join(' and ')}, 2..${Math.max(2, opts.maxKills)} kills per trial, ${opts.jobs} at a time`,
  );
  let failedTrials = 0;
  for (const [index, backend] of opts.backends.entries()) {
    const trials = Math.floor(opts.flowRuns / opts.backends.length) + (index < opts.flowRuns % opts.backends.length ? 1 : 0);
    const bench = await FlowBench.open(backend, `crash-test-cli flow ${backend.name} seed ${opts.seed}`);
    let kills = 0;
    let processes = 0;
    let failed = 0;
    try {
      await runFlowSeries(bench, {
        trials,
        seed: opts.seed + index,
        jobs: opts.jobs,
        minKills: 2,
        maxKills: Math.max(2, opts.maxKills),
        prefix: 'cli-flow',
        onTrial: (trial) => {
          kills += trial.processes.filter((p) => p.killed).length;
          processes += trial.processes.length;
          if (trial.violations.length > 0) failed += 1;
          if (opts.verbose || trial.violations.length > 0) {
            console.log(`  ${describeTrial(trial)}`);
            for (const v of trial.violations.slice(0, 20)) console.log(`    VIOLATION ${v}`);
          }
        },
      });
    } finally {
      await killLiveChildren();
      await bench.close();
    }
    console.log(`${`flow ${backend.name}`.padEnd(16)} trials ${trials}, processes ${processes}, kills ${kills}, trials with violations ${failed}`);
    failedTrials += failed;
  }
  console.log(`flow: trials with violations: ${failedTrials}`);
  return failedTrials === 0 ? 0 : 1;
}

main().then(
  (code) => (process.exitCode = code),
  (error: unknown) => {
    console.error(error instanceof Error ? (error.stack ?? error.message) : String(error));
    process.exitCode = 2;
  },
);
