import type { DataSource } from 'typeorm';
import { TypeOrmCheckpointStore } from '../src/index';
import type { Backend, BenchEnvironment, BenchWaypoint } from './environment';
import { FlowForEach1, FlowForEach20, FlowLine, FlowParallel, FlowRows, flowHooks, flowInput, PAYLOAD_BYTES, STEP_MS } from './flow-pipelines';
import { diffCounts, totalOf, type PgStatementCounter } from './instruments';
import { SilentLogger } from './observers';
import { storeTables } from './stored-rows';
import { BENCH_INPUT, benchPipeline, type Class } from './pipeline';
import { bytes, count, ratio, ratioSpread, section, verdict, type Section } from './report';
import { atLeast, pairedRatio, summarize, within } from './stats';
import { describeCalls, interleave, nextRunId } from './timed-run';

/**
 * The `flow` group (issue 20): what control flow costs, each figure beside a baseline measured in this
 * same run.
 *  1. `parallel` of 4 branches x 5 steps of 20 ms: wall time against one branch alone (the same 5 steps
 *     as a straight-line pipeline), memory store and SQLite. Target <= 1.25x.
 *  2. `forEach` of 1,000 items x one 1 KB step at concurrency 20 on PostgreSQL: items/s against 20
 *     independent concurrent runs doing as many 1 KB steps on the same store. Target >= 0.8x.
 *  3. Resume of a 1,000-item forEach stopped with 500 items done: exactly 500 item steps run, and the
 *     store calls of the resume equal those of a 10-item forEach's resume.
 *  4. Bytes of control-flow rows on PostgreSQL (forEach item step, parallel branch step, decisions)
 *     against the straight-line step row: <= 1,400 B for a 1 KB output, flat over the items.
 */

export interface FlowOptions {
  quick: boolean;
}

/** The four sections of the group. @example sections.push(...(await flowFigures(env, { quick: false }, pg, log))); */
export async function flowFigures(env: BenchEnvironment, options: FlowOptions, pg: PgStatementCounter, progress: (line: string) => void): Promise<Section[]> {
  return [
    await parallelFigure(env, options, progress),
    await forEachFigure(env, options, progress),
    await resumeFigure(env, options, pg, progress),
    await rowBytesFigure(env, options, progress),
  ];
}

/** A failure of one row, as a table row (the other rows still run). */
function failedRow(label: string[], error: unknown, width: number): string[] {
  const message = String(error instanceof Error ? error.message : error)
    .replace(/\s+/g, ' ')
    .slice(0, 110);
  return [...label, `FAILED: ${message}`, ...Array.from({ length: Math.max(0, width - label.length - 1) }, () => '')];
}

async function timedCall(run: () => Promise<{ status: string; stepsExecuted: number }>, steps: number, what: string): Promise<number> {
  const start = performance.now();
  const result = await run();
  const ms = performance.now() - start;
  if (result.status !== 'completed' || result.stepsExecuted !== steps) throw new Error(`${what} ended ${result.status} after ${result.stepsExecuted} of ${steps} steps`);
  return ms;
}

// ---------------------------------------------------------------------------------------------------
// 1. parallel

async function parallelFigure(env: BenchEnvironment, options: FlowOptions, progress: (line: string) => void): Promise<Section> {
  const rounds = options.quick ? 3 : 9;
  const out = section(
    'flow-parallel',
    `parallel: 4 branches x 5 steps of ${STEP_MS} ms against one branch alone`,
    `wall time of the whole run call, median of ${rounds} interleaved rounds (min–max); baseline = the same 5 steps of ${STEP_MS} ms as a straight-line pipeline, same store, same rounds`,
    ['backend', 'one branch alone', '4 branches in parallel', 'ratio', 'target'],
  );
  for (const backend of ['memory', 'sqlite'] as const) {
    progress(`flow/parallel: ${backend}`);
    try {
      const bw = await env.waypoint(backend, { name: 'flow_par' });
      const samples = await interleave(rounds, {
        line: () => timedCall(() => bw.waypoint.run(FlowLine, { runId: nextRunId('flow-line'), input: flowInput() }), 5, 'straight-line run'),
        parallel: () => timedCall(() => bw.waypoint.run(FlowParallel, { runId: nextRunId('flow-par'), input: flowInput() }), 20, 'parallel run'),
      });
      const line = summarize(samples.line);
      const par = summarize(samples.parallel);
      const r = pairedRatio(samples.parallel, samples.line);
      out.rows.push([backend, msSpread(line), msSpread(par), ratioSpread(r), verdict(within(r.median, 1.25))]);
      out.figures[backend] = { lineMs: line, parallelMs: par, ratio: r };
    } catch (error) {
      out.rows.push(failedRow([backend], error, out.columns.length));
      process.exitCode = 1;
    }
  }
  out.notes.push(
    `Target (issue 20): <= 1.25x. The floor of both is 5 x ${STEP_MS} ms = ${5 * STEP_MS} ms of sleeping; the rest is run start, 5 (or 20) recorded steps and run finish.`,
  );
  return out;
}

function msSpread(s: { median: number; min: number; max: number }): string {
  return `${s.median.toFixed(1)} ms (${s.min.toFixed(1)}–${s.max.toFixed(1)})`;
}

// ---------------------------------------------------------------------------------------------------
// 2. forEach throughput

async function forEachFigure(env: BenchEnvironment, options: FlowOptions, progress: (line: string) => void): Promise<Section> {
  const items = options.quick ? 200 : 1000;
  const runs = 20;
  const perRun = items / runs;
  const rounds = options.quick ? 2 : 3;
  const out = section(
    'flow-foreach',
    `forEach: ${items} items x one ${PAYLOAD_BYTES / 1000} KB step, concurrency 20, on PostgreSQL`,
    `items/s over the whole run call, median of ${rounds} interleaved rounds (min–max); baseline = ${runs} independent concurrent runs of ${perRun} ${PAYLOAD_BYTES / 1000} KB steps each (${items} steps) on the same store (default postgresStorage), steps/s over the whole Promise.all`,
    ['store', `${runs} runs x ${perRun} steps`, 'appends / commit', `forEach of ${items}`, 'appends / commit', 'ratio', 'target'],
  );
  progress(`flow/forEach: ${items} items at concurrency 20 vs ${runs} runs`);
  try {
    const bw = await env.waypoint('postgres', { name: 'flow_each' });
    const baseline = benchPipeline({ name: 'flowConcurrentRuns', steps: perRun, payloadBytes: PAYLOAD_BYTES, state: 'flat', hooks: {} });
    const batching = { runs: [] as number[], forEach: [] as number[] };
    // Appends per PostgreSQL statement (and commit) during a measurement: the group-commit batching factor.
    const batched = async (into: number[], measure: () => Promise<number>) => {
      const store = bw.store instanceof TypeOrmCheckpointStore ? bw.store : null;
      const before = store?.groupCommitStats ?? null;
      const value = await measure();
      const after = store?.groupCommitStats ?? null;
      into.push(before && after ? (after.appends - before.appends) / Math.max(1, after.statements - before.statements) : NaN);
      return value;
    };
    const samples = await interleave(rounds, {
      runs: () => batched(batching.runs, () => concurrentRuns(bw, baseline, runs, perRun)),
      forEach: () => batched(batching.forEach, () => forEachRun(bw, FlowForEach20, items)),
    });
    const factor = (values: number[]) => summarize(values.slice(-rounds)).median.toFixed(1);
    const base = summarize(samples.runs);
    const each = summarize(samples.forEach);
    const r = pairedRatio(samples.forEach, samples.runs);
    out.rows.push(['postgres', perSecond(base), factor(batching.runs), perSecond(each), factor(batching.forEach), ratioSpread(r), verdict(atLeast(r.median, 0.8), '≥')]);
    out.figures.postgres = {
      runsStepsPerSecond: base,
      forEachItemsPerSecond: each,
      ratio: r,
      appendsPerCommit: { runs: summarize(batching.runs.slice(-rounds)), forEach: summarize(batching.forEach.slice(-rounds)) },
    };
  } catch (error) {
    out.rows.push(failedRow(['postgres'], error, out.columns.length));
    process.exitCode = 1;
  }
  out.notes.push('Target (issue 20): >= 0.8x. Both include run start and finish: one run for the forEach (plus its item-list decision), 20 for the baseline.');
  out.notes.push(
    '"appends / commit": step rows per statement of the store\'s group commit (batches across runs; 1.0 = every append alone). Independent runs are batched there. The items of one forEach share commits another way, which this column does not count: rows of one run that become ready while its previous write is in flight leave together in one appendRun statement (src/core/flow/flow-executor.ts `drain`).',
  );
  return out;
}

function perSecond(s: { median: number; min: number; max: number }): string {
  return `${count(s.median, 0)}/s (${count(s.min, 0)}–${count(s.max, 0)})`;
}

async function concurrentRuns(bw: BenchWaypoint, pipeline: Class, runs: number, steps: number): Promise<number> {
  const start = performance.now();
  const results = await Promise.all(Array.from({ length: runs }, () => bw.waypoint.run(pipeline, { runId: nextRunId('flow-conc'), input: BENCH_INPUT })));
  const seconds = (performance.now() - start) / 1000;
  for (const r of results)
    if (r.status !== 'completed' || r.stepsExecuted !== steps) throw new Error(`concurrent run ended ${r.status} after ${r.stepsExecuted} of ${steps} steps`);
  return (runs * steps) / seconds;
}

async function forEachRun(bw: BenchWaypoint, pipeline: Class, items: number): Promise<number> {
  let ran = 0;
  flowHooks.onItem = () => void (ran += 1);
  const start = performance.now();
  let result;
  try {
    result = await bw.waypoint.run(pipeline, { runId: nextRunId('flow-each'), input: flowInput(items) });
  } finally {
    flowHooks.onItem = undefined;
  }
  const seconds = (performance.now() - start) / 1000;
  if (result.status !== 'completed' || ran !== items) throw new Error(`forEach run ended ${result.status} after ${ran} of ${items} items`);
  return items / seconds;
}

// ---------------------------------------------------------------------------------------------------
// 3. resume of a half-done forEach

interface ResumeCount {
  /** Item steps that ran on resume. */
  ran: number;
  /** Store calls from the resume call until the first new item step's append resolved (heartbeats left out). */
  toFirst: Record<string, number>;
  /** Store calls of the whole resume call (heartbeats left out). */
  whole: Record<string, number>;
  /** PostgreSQL statements until the first new item step was durable (0 off PostgreSQL). */
  statementsToFirst: number;
}

/** Runs a forEach of `items` at concurrency 1 that fails at item `items / 2`, then resumes it and counts. */
async function halfDoneResume(bw: BenchWaypoint, items: number, pg: PgStatementCounter | undefined): Promise<ResumeCount> {
  const runId = nextRunId('flow-resume');
  const done = items / 2;
  flowHooks.failAtItem = done;
  try {
    await bw.waypoint.run(FlowForEach1, { runId, input: flowInput(items) }).then(
      (r) => {
        throw new Error(`the first run of '${runId}' ended ${r.status}; it should fail at item ${done}`);
      },
      (error: unknown) => {
        if (!String(error instanceof Error ? error.message : error).includes(`stop at item ${done}`)) throw error;
      },
    );
  } finally {
    flowHooks.failAtItem = undefined;
  }
  let ran = 0;
  flowHooks.onItem = () => void (ran += 1);
  let callsAtFirst: Record<string, number> | null = null;
  let statementsAtFirst = 0;
  bw.calls.onResolved = (method) => {
    if (method !== 'appendStep' || callsAtFirst !== null || ran === 0) return;
    callsAtFirst = bw.calls.snapshot();
    statementsAtFirst = pg?.total ?? 0;
  };
  const before = bw.calls.snapshot();
  const statementsBefore = pg?.total ?? 0;
  if (pg) pg.active = true;
  let result;
  try {
    result = await bw.waypoint.resume(runId);
  } finally {
    if (pg) pg.active = false;
    bw.calls.onResolved = null;
    flowHooks.onItem = undefined;
  }
  if (result.status !== 'completed') throw new Error(`resume of '${runId}' ended ${result.status}`);
  if (callsAtFirst === null) throw new Error(`resume of '${runId}': no item step was appended`);
  return {
    ran,
    toFirst: withoutHeartbeat(diffCounts(callsAtFirst, before)),
    whole: withoutHeartbeat(diffCounts(bw.calls.snapshot(), before)),
    statementsToFirst: statementsAtFirst - statementsBefore,
  };
}

function withoutHeartbeat(calls: Record<string, number>): Record<string, number> {
  const { renewLease: _heartbeat, ...rest } = calls;
  return rest;
}

async function resumeFigure(env: BenchEnvironment, options: FlowOptions, pg: PgStatementCounter, progress: (line: string) => void): Promise<Section> {
  const large = options.quick ? 200 : 1000;
  const small = 10;
  const out = section(
    'flow-resume',
    `Resume of a forEach of ${large} items stopped with ${large / 2} done, against a ${small}-item forEach's resume`,
    `concurrency 1, a NonRetryableError at item ${large / 2} (${small / 2}) fails the run, then resume; store calls counted through the counting store (lease heartbeats left out), until the first new item step is durable and over the whole resume`,
    ['backend', 'items', 'item steps on resume', 'store calls to 1st step', 'PG statements', 'whole resume, besides item and status appends', 'target'],
  );
  for (const backend of ['memory', 'sqlite', 'postgres'] as const satisfies readonly Backend[]) {
    progress(`flow/resume: ${backend}`);
    try {
      // Silent: the first run of each measurement fails on purpose, which the default logger reports.
      const bw = await env.waypoint(backend, { name: 'flow_resume', logger: new SilentLogger() });
      const counter = backend === 'postgres' ? pg : undefined;
      const few = await halfDoneResume(bw, small, counter);
      const many = await halfDoneResume(bw, large, counter);
      // Besides the item steps' appends and the run stream's status appends: the stream writer sends what is
      // buffered every STREAM_FLUSH_MS, so a resume that outlasts that sends its start and end statuses apart
      // (2 appends) and a quicker one together (1); that follows the resume's duration, not its length in rows.
      const besides = (c: ResumeCount) => {
        const { appendStep = 0, appendEvents: _statuses, ...rest } = c.whole;
        return { ...rest, appendStep: appendStep - c.ran };
      };
      const statuses = (c: ResumeCount) => c.whole.appendEvents ?? 0;
      const rows: [number, ResumeCount][] = [
        [small, few],
        [large, many],
      ];
      for (const [items, c] of rows) {
        const stepsOk = c.ran === items / 2;
        const loadEqual = totalOf(c.toFirst) === totalOf(few.toFirst);
        const restEqual = totalOf(besides(c)) === totalOf(besides(few)) && statuses(c) <= 2;
        const target =
          items === small
            ? stepsOk
              ? 'baseline'
              : `MISSED: ${c.ran} steps, not ${items / 2}`
            : !stepsOk
              ? `MISSED: ${c.ran} steps, not ${items / 2}`
              : loadEqual && restEqual
                ? 'met (equal count)'
                : `MISSED: ${totalOf(c.toFirst)} vs ${totalOf(few.toFirst)} calls to 1st step, ${totalOf(besides(c))} vs ${totalOf(besides(few))} besides appends, ${statuses(c)} status appends`;
        out.rows.push([
          backend,
          String(items),
          `${c.ran}${stepsOk ? ' (exact)' : ''}`,
          `${totalOf(c.toFirst)}: ${describeCalls(c.toFirst)}`,
          backend === 'postgres' ? String(c.statementsToFirst) : '—',
          `${totalOf(besides(c))}: ${describeCalls(besides(c))}; stream status appends ${statuses(c)}`,
          target,
        ]);
      }
      out.figures[backend] = { [small]: few, [large]: many };
    } catch (error) {
      out.rows.push(failedRow([backend, String(large)], error, out.columns.length));
      process.exitCode = 1;
    }
  }
  out.notes.push(
    `Target (issue 20): exactly ${large / 2} item steps run on resume, and the same number of store calls as the ${small}-item resume (to the first new step, and over the whole resume besides the one append per item step and the stream's status appends, at most 2: batched by time, they follow the resume's duration): loading a half-done forEach costs the same round trips whatever its length.`,
  );
  return out;
}

// ---------------------------------------------------------------------------------------------------
// 4. bytes per control-flow row

interface StoredRow {
  sequence: number;
  agent_id: string;
  step_name: string;
  path: string | null;
  row_bytes: number;
  output_bytes: number;
}

async function rowBytesFigure(env: BenchEnvironment, options: FlowOptions, progress: (line: string) => void): Promise<Section> {
  const items = options.quick ? 100 : 1000;
  const out = section(
    'flow-bytes',
    `Bytes per recorded control-flow row on PostgreSQL (1 KB step outputs, forEach of ${items})`,
    'pg_column_size(row) of each row read back from the database, against the straight-line step row with the same 1 KB output in the same run',
    ['row', 'path', 'row', 'output column', 'vs straight-line row', 'target'],
  );
  progress(`flow/bytes: PostgreSQL, forEach of ${items}`);
  try {
    const bw = await env.waypoint('postgres', { name: 'flow_bytes' });
    const runId = nextRunId('flow-rows');
    const result = await bw.waypoint.run(FlowRows, { runId, input: flowInput(items) });
    if (result.status !== 'completed') throw new Error(`the rows run ended ${result.status}`);
    const rows = await storedRows(bw, runId);
    const straight = pick(rows, (r) => r.agent_id === 'Straight', 0, 'the straight-line step');
    const itemRows = rows.filter((r) => r.agent_id === 'ItemWorker');
    if (itemRows.length !== items) throw new Error(`${itemRows.length} item rows stored, expected ${items}`);
    const byIndex = (i: number) => itemRows.find((r) => r.path?.startsWith(`forEach(results)[${i}]/`)) ?? [...itemRows].sort((a, b) => a.sequence - b.sequence)[i];
    const decisions = rows.filter((r) => r.step_name === 'decision').sort((a, b) => a.sequence - b.sequence);
    const picked: [string, StoredRow, 'step' | 'key' | 'list'][] = [
      ['straight-line step (baseline)', straight, 'step'],
      ['parallel branch step', pick(rows, (r) => r.agent_id.startsWith('Side'), 0, 'a parallel branch step'), 'step'],
      ['parallel branch step (2nd)', pick(rows, (r) => r.agent_id.startsWith('Side'), 1, 'the second parallel branch step'), 'step'],
      ['step in a branch case', pick(rows, (r) => r.agent_id === 'Routed', 0, 'the routed step'), 'step'],
      ['forEach item step @10', byIndex(10), 'step'],
      [`forEach item step @${items - 10}`, byIndex(items - 10), 'step'],
      ['decision: branch key', decisions.find((r) => r.path === 'branch') ?? decisions[0], 'key'],
      [`decision: forEach item list (${items} numbers)`, decisions.find((r) => r.path === 'forEach(results)') ?? decisions[1], 'list'],
    ];
    for (const [label, row, kind] of picked) {
      if (!row) throw new Error(`no stored row for ${label}`);
      const vs = row.row_bytes / straight.row_bytes;
      const target =
        kind === 'list'
          ? 'one per forEach (grows with the list)'
          : row.row_bytes <= 1400
            ? `met (≤1,400 B) by ${1400 - row.row_bytes} B`
            : `MISSED (≤1,400 B) by ${row.row_bytes - 1400} B`;
      out.rows.push([label, row.path ?? '(null)', bytes(row.row_bytes), bytes(row.output_bytes), ratio(vs), target]);
    }
    const first = byIndex(10);
    const last = byIndex(items - 10);
    const growth = last.row_bytes / first.row_bytes;
    out.notes.push(
      `Flat: item row @${items - 10} / @10 = ${ratio(growth)} ${growth <= 1.05 ? 'met (within 5%)' : `MISSED by ${((growth - 1) * 100).toFixed(0)}%`}; a few bytes come from longer paths (more digits in the index).`,
    );
    out.figures.postgres = Object.fromEntries(picked.map(([label, row]) => [label, { path: row.path, rowBytes: row.row_bytes, outputBytes: row.output_bytes }]));
    if (rows.every((r) => r.path === null))
      out.notes.push('No path column on this store: control-flow rows were matched by agent and order (the store predates step paths on PostgreSQL).');
  } catch (error) {
    out.rows.push(failedRow(['postgres'], error, out.columns.length));
    process.exitCode = 1;
  }
  out.notes.push(
    'Target (issue 20): <= 1,400 B per recorded step with a 1 KB output, flat over the items. The item-list decision is one row per forEach and holds the whole list, so it is shown without a target.',
  );
  return out;
}

function pick(rows: readonly StoredRow[], match: (r: StoredRow) => boolean, nth: number, what: string): StoredRow {
  const found = rows.filter(match).sort((a, b) => a.sequence - b.sequence)[nth];
  if (!found) throw new Error(`${what} was not found among the stored rows`);
  return found;
}

/** Every step row of `runId` with its stored size; `path` is null when the store has no such column. */
async function storedRows(bw: BenchWaypoint, runId: string): Promise<StoredRow[]> {
  const dataSource = (bw.store as unknown as { dataSource: DataSource }).dataSource;
  const schema = (dataSource.options as { schema?: string }).schema;
  const steps = storeTables(schema).steps;
  const rows = await dataSource.query<StoredRow[]>(
    `SELECT sequence, agent_id, step_name, to_jsonb(s) ->> 'path' AS path, pg_column_size(s.*) AS row_bytes, octet_length(output) AS output_bytes FROM ${steps} s WHERE run_id = $1 ORDER BY sequence`,
    [runId],
  );
  return rows.map((r) => ({ ...r, sequence: Number(r.sequence), row_bytes: Number(r.row_bytes), output_bytes: Number(r.output_bytes) }));
}
