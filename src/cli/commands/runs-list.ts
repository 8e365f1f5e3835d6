import { listShownRuns } from '../../core/flow/fan-out';
import { holderIsDead } from '../../core/lease/run-lease';
import { loadRunsProgress } from '../../core/history/progress-reads';
import type { RunProgress } from '../../core/history/run-progress';
import type { PipelinePlan } from '../../core/plan/plan-reader';
import type { RunFilter, RunRecord, RunStatus } from '../../contract/checkpoint-store';
import { formatAge, parseCount, parseSince } from '../durations';
import { EXIT, usageError, type ExitCode } from '../exit-codes';
import { clip, printJson, table, type CliIo } from '../output';
import { progressText } from '../progress';
import { openSession, type GlobalOptions } from '../session';
import { errorMessage } from '../timeline';

export const RUN_STATUSES: readonly RunStatus[] = ['running', 'paused', 'waiting', 'completed', 'failed', 'cancelled'];

export interface ListOptions {
  status?: string;
  pipeline?: string;
  since?: string;
  limit?: string;
  stale?: boolean;
  parent?: string;
  /** Also the hidden item runs of `forEach(..., { distribute: true })` over an agent or a sequence. */
  all?: boolean;
}

/** A run as `runs list --json` prints it. */
export interface RunSummary {
  runId: string;
  pipeline: string;
  version: string;
  status: RunStatus;
  lastSequence: number;
  cursor: { agentIndex: number; stepIndex: number };
  leaseOwner: string | null;
  leaseExpiresAt: Date | null;
  leaseEpoch: number;
  /**
   * Running, but no live worker: its lease expired, or its holder is a process of this host that no
   * longer exists (the default `host:pid:random` worker id says which). Resume it.
   */
  stale: boolean;
  /** The run this one is a child run of (an item of its forEach), or null. */
  parentRunId: string | null;
  error: string | null;
  resumeHint: string | null;
  createdAt: Date;
  updatedAt: Date;
  /** Steps recorded of steps known so far, and forEach items (`RunProgress`, as `RunInfo.progress` and the page). */
  progress?: RunProgress;
}

/** `waypoint-durable runs list`: stored runs, most recently updated first, as a table or JSON. */
export async function runsList(globals: GlobalOptions, options: ListOptions, io: CliIo): Promise<ExitCode> {
  const limit = options.limit === undefined ? 50 : parseCount(options.limit, '--limit');
  const filter: RunFilter = { limit: options.stale ? undefined : limit };
  if (options.status) filter.status = parseStatuses(options.status);
  if (options.stale) filter.status = ['running'];
  if (options.pipeline) filter.pipelineName = options.pipeline;
  if (options.since) filter.since = parseSince(options.since);
  if (options.parent !== undefined) filter.parentRunId = options.parent;
  const session = await openSession(globals, io, { command: 'runs list' });
  try {
    const now = new Date();
    // Filtered here too: a store that does not know the parent filter lists every run.
    const store = session.waypoint.store;
    // Items of distributed forEach bodies are listed under their parent (--parent, runs show), not here.
    const listed = (options.all ? await store.listRuns(filter) : await listShownRuns(store, filter)).filter(
      (run) => options.parent === undefined || run.parentRunId === options.parent,
    );
    let runs = listed.map((run) => summarize(run, now));
    if (options.stale) runs = runs.filter((run) => run.stale).slice(0, limit);
    const shown = new Map(listed.map((run) => [run.runId, run]));
    const progress = await loadRunsProgress(
      store,
      runs.map((run) => shown.get(run.runId)!),
      (run) => planOf(session.plans, run),
      session.integrity,
    );
    runs.forEach((run, i) => (run.progress = progress[i]));
    if (globals.json) {
      printJson(io, runs);
      return EXIT.OK;
    }
    if (runs.length === 0) {
      io.out(`No runs${describeFilter(options)} in ${session.storeDisplay}.\n`);
      return EXIT.OK;
    }
    const rows = runs.map((run) => [
      run.runId,
      `${run.pipeline}@${run.version}`,
      run.stale ? 'running (stale)' : run.status,
      String(run.lastSequence),
      run.progress ? progressText(run.progress) : '',
      formatAge(run.updatedAt, now),
      clip(note(run, now), 70),
    ]);
    io.out(table(['RUN', 'PIPELINE', 'STATUS', 'SEQ', 'STEPS', 'UPDATED', 'NOTE'], rows, [false, false, false, true, true, false, false]));
    if (runs.length === limit) io.err(`(showing the ${limit} most recently updated runs; pass --limit to see more)\n`);
    return EXIT.OK;
  } finally {
    await session.close();
  }
}

/** Parses `--status running,paused`. */
export function parseStatuses(text: string): RunStatus[] {
  const statuses = text
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean);
  const unknown = statuses.filter((s) => !RUN_STATUSES.includes(s as RunStatus));
  if (statuses.length === 0 || unknown.length > 0) throw usageError(`--status '${text}' is not a run status: use one or more of ${RUN_STATUSES.join(', ')} (comma-separated).`);
  return statuses as RunStatus[];
}

/** The plan a run's progress counts from: the module's pipeline of that name, when its version is the run's. */
export function planOf(plans: ReadonlyMap<string, PipelinePlan>, run: RunRecord): PipelinePlan | undefined {
  const plan = plans.get(run.pipelineName);
  return plan && plan.version === run.pipelineVersion ? plan : undefined;
}

/** The listing view of a run; `stale` when it is running without a live lease. */
export function summarize(run: RunRecord, now: Date, progress?: RunProgress): RunSummary {
  const leaseLive = run.leaseOwner !== null && run.leaseExpiresAt !== null && run.leaseExpiresAt > now && !holderIsDead(run.leaseOwner);
  const finished = run.status === 'completed' || run.status === 'failed' || run.status === 'cancelled';
  return {
    runId: run.runId,
    pipeline: run.pipelineName,
    version: run.pipelineVersion,
    status: run.status,
    lastSequence: run.lastSequence,
    cursor: { agentIndex: run.cursorAgent, stepIndex: run.cursorStep },
    leaseOwner: finished || !leaseLive ? null : run.leaseOwner,
    leaseExpiresAt: finished || !leaseLive ? null : run.leaseExpiresAt,
    leaseEpoch: run.leaseEpoch,
    stale: run.status === 'running' && !leaseLive,
    parentRunId: run.parentRunId ?? null,
    error: run.error === null ? null : errorMessage(run.error),
    resumeHint: run.resumeHint,
    createdAt: run.createdAt,
    updatedAt: run.updatedAt,
    ...(progress ? { progress } : {}),
  };
}

function note(run: RunSummary, now: Date): string {
  if (run.stale) return `no live worker; resume it: waypoint-durable runs resume ${run.runId} --module <path>`;
  if (run.status === 'running' && run.leaseOwner) return `on ${run.leaseOwner}, lease ${run.leaseExpiresAt ? `expires ${formatAge(run.leaseExpiresAt, now)}` : 'held'}`;
  if (run.status === 'failed') return run.error ?? 'failed';
  if (run.status === 'completed') return '';
  return run.resumeHint ?? '';
}

function describeFilter(options: ListOptions): string {
  const parts = [
    options.stale ? 'stale' : options.status ? `with status ${options.status}` : '',
    options.pipeline ? `of pipeline ${options.pipeline}` : '',
    options.since ? `updated since ${options.since}` : '',
    options.parent !== undefined ? `with parent ${options.parent}` : '',
  ].filter(Boolean);
  return parts.length ? ` ${parts.join(' ')}` : '';
}
