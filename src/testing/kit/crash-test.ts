import { randomBytes } from 'node:crypto';
import type { ContainerModule } from 'inversify';
import { WaypointError } from '../../contract/errors';
import type { Class } from '../../decorators/class-type';
import type { CrashHook, CrashPointSite } from '../../core/step/crash-points';
import type { Waypoint } from '../../composition/waypoint';
import { compare, effectExecutions, type CrashProblem, type CrashReport, type PointOutcome, type ScenarioEnd } from './crash-report';
import { Trace, type CrashPoint } from './crash-trace';
import { KitProcesses } from './kit-process';
import { assertDecoratorMetadata } from './metadata-check';
import { crashPointError, ProcessLife } from './mortal-store';
import { TestClock } from './test-clock';

/** Options of {@link crashTest}. */
export interface CrashTestOptions {
  /** The run's input (the pipeline's state class validates it). */
  input?: unknown;
  /**
   * Container modules: your services, and a storage module (`sqliteStorage(...)`, `postgresStorage(...)`)
   * to test on that store. Default: the kit's memory store. Each simulated process loads them anew.
   */
  modules?: ContainerModule[];
  /**
   * What you can see of the outside world, as numbers: `{ emails: () => outbox.length }`. Each is read
   * before and after every run; a crashed-and-resumed run must change it as much as the run without a crash.
   */
  observe?: Record<string, () => number | Promise<number>>;
  /** 'all' (default) crashes at every point the reference run passed; a number crashes at a sample of that many. */
  points?: 'all' | number;
  /** Seed of the sample when `points` is a number (default 1): the same seed picks the same points. */
  seed?: number;
  /** Signals to send when the run waits for them (name -> payload); a waiting run is then resumed. */
  signals?: Record<string, unknown>;
  /**
   * Paths of state values an external system gives out anew on each call (a message id, a random
   * envelope id) that the final states are compared without: `['delivery.messageId', 'deliveries.*.messageId']`.
   * Values built from the operation key need none (the key is replaced by a stable name before comparing).
   */
  ignoreState?: string[];
  /**
   * Effects and recorded calls that may run once more when the process dies after their body ran and
   * before their outcome was recorded (the one gap the guarantees name): reads, and model calls that are
   * paid for again but change nothing outside. Exact names, or a prefix ending in `*`:
   * `['durable:ai:model', 'durable:ai:tool:search:*']`. A repeat outside that gap is still a problem.
   */
  repeatable?: string[];
  /** Prefix of the run ids the test uses (default `crash-test-<random>`). */
  runId?: string;
}

/**
 * Crash-tests a pipeline: runs it once without a crash (the reference), then once per crash point,
 * abandoning the execution there as a process death would (nothing after the point runs or is written,
 * its lease and timers are dropped) and resuming the run in a fresh Waypoint on the same store. The report
 * names each point where the final state, an observed value or a side effect's executions differ.
 *
 * @example
 * const report = await crashTest(Checkout, { input: { cart: 'c-1' }, observe: { charges: () => bank.charges.length } });
 * assert.ok(report.ok, report.summary);
 */
export async function crashTest(pipeline: Class, options: CrashTestOptions = {}): Promise<CrashReport> {
  assertDecoratorMetadata(pipeline, 'crashTest');
  const clock = new TestClock({ skipSleeps: true });
  const processes = new KitProcesses(options.modules ?? [], clock);
  const base = options.runId ?? `crash-test-${randomBytes(4).toString('hex')}`;
  const observing = options.observe !== undefined && Object.keys(options.observe).length > 0;
  const refId = `${base}-reference`;
  const reference = await scenario(processes, pipeline, options, refId, undefined);
  if (reference.status !== 'completed') {
    throw new WaypointError(
      'KIT_REFERENCE_FAILED',
      `crashTest: the reference run '${refId}' of pipeline ${pipeline.name} ended ${reference.status}${reference.detail ? ` (${reference.detail})` : ''} instead of completed. ` +
        'Make it complete without a crash first; give crashTest the signals it waits for (signals: { name: payload }).',
      { runId: refId },
    );
  }
  const all = reference.trace.points;
  const chosen = options.points === undefined || options.points === 'all' ? all : sample(all, options.points, options.seed ?? 1);
  const problems: CrashProblem[] = [];
  const outcomes: PointOutcome[] = [];
  const traces = new Map<string, Trace>();
  for (const [i, point] of chosen.entries()) {
    const end = await scenario(processes, pipeline, options, `${base}-${i + 1}`, point);
    traces.set(point.id, end.trace);
    const found = end.reached ? compare(point, end, reference, { observing, repeatable: options.repeatable ?? [] }, end.unrecorded) : [];
    if (end.reached && end.status !== 'completed' && found.length === 0) found.push(notResumed(point, end));
    problems.push(...found);
    outcomes.push({ ...point, reached: end.reached, ok: found.length === 0 });
  }
  return {
    ok: problems.length === 0,
    problems,
    points: outcomes,
    available: all.length,
    effects: effectExecutions(reference.trace, traces),
    reference: { status: reference.status, state: reference.state, observed: reference.observed },
    summary: problems.length === 0 ? `crashTest: ${outcomes.length} crash points, no problem.` : problems.map((p) => `- [${p.kind}] ${p.message}`).join('\n'),
  };
}

interface Scenario extends ScenarioEnd {
  reached: boolean;
  /** Effect keys whose body started in the killed process and whose outcome it did not record. */
  unrecorded: ReadonlySet<string>;
  detail?: string;
}

/** One run: without `crashAt`, straight to its end; with it, killed at that point and resumed in a new process. */
async function scenario(processes: KitProcesses, pipeline: Class, options: CrashTestOptions, runId: string, crashAt: CrashPoint | undefined): Promise<Scenario> {
  const before = await readObserved(options.observe);
  const trace = new Trace(runId);
  let reached = false;
  const unrecorded = new Set<string>();
  if (crashAt) {
    const life = new ProcessLife();
    const hook: CrashHook = (site) => {
      if (site.runId !== runId && !site.runId.startsWith(`${runId}/`)) return;
      if (life.death) throw life.death;
      const point = trace.pass(site);
      if (point.id === crashAt.id) {
        reached = true;
        throw life.kill(crashPointError(runId, `'${point.id}'`));
      }
      if (site.kind === 'before-effect') {
        trace.effectStarts(site);
        unrecorded.add(site.key!);
      } else if (site.kind === 'effect-recorded') unrecorded.delete(site.key!);
    };
    const dying = await processes.open(life, hook);
    try {
      await drive(dying, pipeline, options, runId);
    } catch (error) {
      if (!life.dead) throw error; // a failure of the pipeline itself, before the point: the reference would have failed too
    } finally {
      await dying.close().catch(() => undefined);
    }
    if (!reached) return { status: 'unreached', state: undefined, observed: {}, trace, reached, unrecorded };
  }
  const life = new ProcessLife();
  const track: CrashHook = (site: CrashPointSite) => {
    if (site.runId !== runId && !site.runId.startsWith(`${runId}/`)) return;
    if (!crashAt) trace.pass(site);
    if (site.kind === 'before-effect') trace.effectStarts(site);
  };
  const waypoint = await processes.open(life, track);
  try {
    const result = await drive(waypoint, pipeline, options, runId);
    const after = await readObserved(options.observe);
    const observed: Record<string, number> = {};
    for (const name of Object.keys(after)) observed[name] = after[name] - before[name];
    return {
      status: result.status,
      state: without(normalized(result.state, runId, trace.keys), options.ignoreState ?? []),
      observed,
      trace,
      reached: true,
      unrecorded,
      detail: result.detail,
    };
  } finally {
    await waypoint.close();
  }
}

/** Runs (or resumes) the run to an end, sending the signals it waits for that the options hold. */
async function drive(waypoint: Waypoint, pipeline: Class, options: CrashTestOptions, runId: string): Promise<{ status: string; state: unknown; detail?: string }> {
  const sent = new Set<string>();
  for (;;) {
    const result = await waypoint.run(pipeline, { runId, input: (options.input ?? {}) as Record<string, unknown> });
    if (result.status !== 'waiting') return { status: result.status, state: result.state };
    const info = await waypoint.get(runId);
    const waitingFor = /for signal '([^']+)'/.exec(info?.resumeHint ?? '')?.[1];
    if (waitingFor === undefined || sent.has(waitingFor) || !options.signals || !(waitingFor in options.signals))
      return { status: 'waiting', state: result.state, detail: waitingFor ? `waiting for signal '${waitingFor}'` : undefined };
    sent.add(waitingFor);
    await waypoint.signal(runId, waitingFor, options.signals[waitingFor]);
  }
}

async function readObserved(observe: CrashTestOptions['observe']): Promise<Record<string, number>> {
  const values: Record<string, number> = {};
  for (const [name, read] of Object.entries(observe ?? {})) values[name] = await read();
  return values;
}

/** `state` without the values at `paths` (dotted, `*` for every key or index). */
function without(state: unknown, paths: readonly string[]): unknown {
  const drop = (value: unknown, parts: readonly string[]): void => {
    if (value === null || typeof value !== 'object' || parts.length === 0) return;
    const [head, ...rest] = parts;
    const record = value as Record<string, unknown>;
    for (const key of head === '*' ? Object.keys(record) : [head]) {
      if (rest.length === 0) delete record[key];
      else drop(record[key], rest);
    }
  };
  for (const path of paths) drop(state, path.split('.'));
  return state;
}

/** The state with the scenario's run id and its operation keys replaced, so runs under different ids compare equal. */
function normalized(state: unknown, runId: string, keys: ReadonlyMap<string, string>): unknown {
  let text = JSON.stringify(state ?? null);
  for (const key of [...keys.keys()].filter((k) => k.length >= 8).sort((a, b) => b.length - a.length)) text = text.split(key).join(keys.get(key));
  return JSON.parse(text.split(runId).join('<run>')) as unknown;
}

function notResumed(point: CrashPoint, end: Scenario): CrashProblem {
  return {
    point: point.id,
    step: point.step,
    kind: 'not-resumed',
    message: `After a crash at '${point.id}' (step '${point.step}'), the resumed run ended ${end.status}${end.detail ? ` (${end.detail})` : ''}, not completed as without a crash.`,
  };
}

/**
 * `n` points picked by a seeded generator, in their order in the run. They are drawn from the points sorted
 * by id, so the same seed picks the same points even when concurrent branches or items interleave differently.
 */
function sample(points: readonly CrashPoint[], n: number, seed: number): CrashPoint[] {
  if (n >= points.length) return [...points];
  let s = seed >>> 0 || 1;
  const random = () => {
    // mulberry32
    s = (s + 0x6d2b79f5) >>> 0;
    let t = s;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
  const ids = points.map((p) => p.id).sort();
  for (let i = ids.length - 1; i > 0; i--) {
    const j = Math.floor(random() * (i + 1));
    [ids[i], ids[j]] = [ids[j], ids[i]];
  }
  const picked = new Set(ids.slice(0, Math.max(0, n)));
  return points.filter((p) => picked.has(p.id));
}
