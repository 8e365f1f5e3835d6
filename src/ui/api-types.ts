/**
 * The JSON of the UI's API (src/ui/read-api.ts, src/ui/actions.ts), stated once for both ends: the server builds
 * these views (run-views.ts, flow-view.ts, read-api.ts, time-travel.ts) and the page's scripts (src/ui/browser,
 * through globals.d.ts) read them. Dates are ISO strings, as they go over the wire.
 *
 * This module imports nothing and holds only types: the page's build (tsconfig.browser.json, DOM libs, no
 * Node types) compiles it too. So the few store and core types the views carry are restated here, and
 * run-views.ts checks at compile time that they are still the same as the originals.
 */

/** A run's status: the store's RunStatus (src/contract/checkpoint-store.ts). */
export type RunStatus = 'running' | 'paused' | 'waiting' | 'completed' | 'failed' | 'cancelled';

/** A step row's status: the store's StepStatus. */
export type StepStatus = 'completed' | 'failed' | 'skipped';

/** An operation's state: the store's OperationState. It doubles as the CSS class of its tag on the page. */
export type OperationState = 'started' | 'committed' | 'failed';

/** Model calls, their tokens and tool calls (src/integrations/ai/usage.ts). */
export interface AiUsage {
  modelCalls: number;
  inputTokens: number;
  outputTokens: number;
  toolCalls: number;
}

/** What the AI calls of one step recorded, and how much of it a later attempt reused (src/integrations/ai/usage.ts). */
export interface StepAiUsage extends AiUsage {
  /** `agentId/stepName`. */
  step: string;
  reused: AiUsage;
}

/** Steps done out of the total: from the registered plan, or counted from recorded rows without one. */
/**
 * A run's progress (core/history/run-progress.ts `RunProgress`, the same figures as `RunInfo.progress` and the CLI):
 * `done` steps recorded of `total` known so far.
 */
export interface ProgressView {
  /** Steps recorded (completed or skipped); decisions and other `$waypoint` rows are not steps. */
  done: number;
  /** Steps known so far (the plan as far as the recorded decisions tell); null when the pipeline is not registered with the UI and the run is not finished. */
  total: number | null;
  /** Where `total` comes from: the plan of a straight line, the plan's tree as far as the decisions tell, or the rows alone. */
  basis: 'plan' | 'recorded' | 'flow';
  /** The run's forEach items, once an item list is recorded: done (all steps recorded, or child run completed) of total. */
  items?: { done: number; total: number };
}

/** A stored error (`describeError` JSON): name, message, code. */
export interface ErrorView {
  name: string;
  message: string;
  code: string | null;
}

export interface LeaseView {
  owner: string;
  epoch: number;
  expiresAt: string | null;
  /** True when the lease has run out without being released: its executor probably died. */
  expired: boolean;
}

/** One row of the runs list. */
export interface RunSummaryView {
  runId: string;
  pipeline: string;
  version: string;
  status: RunStatus;
  progress: ProgressView;
  startedAt: string;
  updatedAt: string;
  lease: LeaseView | null;
  resumeHint: string | null;
  error: ErrorView | null;
}

/** A recorded step on the timeline. */
export interface StepView {
  sequence: number;
  key: string;
  agentId: string;
  agentIndex: number;
  stepIndex: number;
  name: string;
  /** Where the step sits in a control-flow run (`loop[2]/Validate/runTests`); `agentId/stepName` on a straight line. */
  path: string;
  /** `skipped`: a `when` that said no. */
  status: StepStatus;
  startedAt: string;
  completedAt: string;
  durationMs: number;
  /** Attempt that succeeded (1 = first try). */
  attempt: number;
  /** Executor session that recorded it (1-based); 0 for rows a fork copied from another run. */
  session: number;
  /** `executed` by the latest session, `restored` from a checkpoint by a later session, `copied` by a fork. */
  origin: 'executed' | 'restored' | 'copied';
  /** Succeeded after failed attempts in its session. */
  retried: boolean;
  sideEffectsCommitted: boolean;
  /** Model calls, tokens and tool calls recorded by `waypoint/ai`, and what a resume did not repeat; null without any. */
  ai: StepAiUsage | null;
}

/** A step with failed attempts and no recorded row: the step the run failed on (or is retrying). */
export interface FailedStepView {
  key: string;
  agentId: string;
  name: string;
  agentIndex: number | null;
  stepIndex: number | null;
  attempts: number;
  lastError: ErrorView | null;
  lastAt: string;
}

export interface AttemptView {
  stepKey: string;
  attempt: number;
  session: number;
  at: string;
  state: OperationState;
  error: ErrorView | null;
}

export interface SideEffectView {
  stepKey: string;
  name: string;
  state: OperationState;
  attempts: number;
  createdAt: string;
  updatedAt: string;
  error: ErrorView | null;
}

export interface IntegrityView {
  /** `unverifiable`: rows sealed with an HMAC but the UI was started without the key. */
  status: 'verified' | 'corrupted' | 'unverifiable' | 'empty';
  rows: number;
  seal: 'sha256' | 'hmac' | null;
  sequence: number | null;
  message: string | null;
}

/** Where one executor session ended and the next began (the core's ResumePoint, src/core/history/sessions.ts, with ISO times). */
export interface ResumePointView {
  /** Number (1-based) of the session that starts here. */
  session: number;
  /** Last sequence recorded before the new session started (0 when none). */
  afterSequence: number;
  /** First sequence the new session recorded, or null when it has recorded none yet. */
  beforeSequence: number | null;
  /** Key of the step the new session started with (its path in a construct, else `agentId/stepName`). */
  stepKey: string;
  idleFrom: string;
  resumedAt: string;
  gapMs: number;
  reason: 'fork' | 'attempts' | 'gap';
}

/** A system row (base, patch, decision) on the timeline. */
export interface SystemRowView {
  sequence: number;
  kind: string;
  at: string;
}

/** Everything the run page shows. */
export interface RunDetailView {
  run: RunSummaryView & {
    cursor: { agentIndex: number; stepIndex: number };
    lastSequence: number;
    /** Environment metadata of the process that created the run (host, pid, node, worker). */
    createdBy: Record<string, string>;
    forkedFrom: { runId: string; atSequence: number } | null;
    /** The run this one is a child of (a forEach over a @Pipeline), with its item index. */
    parent: { runId: string; itemIndex: number | null } | null;
  };
  /** The control-flow tree (lanes, iterations, items); null for a straight-line run. */
  flow: FlowView | null;
  /** Agents with their steps in plan order (from the plan when registered, else from the records). */
  /** Agents, steps in plan order (`index` in the agent); a window lists only its steps, failed and unrecorded ones (`hidden`: the rest). */
  agents: { id: string; steps: { name: string; key: string; index: number }[]; hidden: number }[];
  planKnown: boolean;
  steps: StepView[];
  /** Step views the flow tree refers to that `steps` does not carry (a long run's early items); kept by the page across polls. */
  flowSteps: StepView[];
  failedSteps: FailedStepView[];
  systemRows: SystemRowView[];
  sessions: number;
  resumePoints: ResumePointView[];
  attempts: AttemptView[];
  sideEffects: SideEffectView[];
  signals: { name: string; state: OperationState; at: string }[];
  integrity: IntegrityView;
  /** Sequences that time travel can show: oldest (0, or a retention base) to latest. */
  checkpoints: { oldest: number; latest: number };
  actions: { allowed: boolean; resume: boolean; cancel: boolean; fork: boolean };
  /** What of the run's steps and side effects this answer carries (`?steps=N&since=S`, see StepsWindow). */
  window: StepsWindow;
}

/**
 * The part of a long run a detail answer carries: the newest `steps` step views (500 by default), or with
 * `since`, only those recorded after that sequence (the page's poll), plus the newest side effects.
 */
export interface StepsWindow {
  /** Step views the run has in all. */
  total: number;
  /** Step views older than the first one sent (fetch them from `GET /api/runs/:id/steps?before=`); 0 with `since`. */
  older: number;
  /** The `since` this answer honours: `steps` holds only rows after it, to append to those already held; null: `steps` replaces them. */
  since: number | null;
  /** Side effects older than the first one sent. */
  olderSideEffects: number;
}

/** `GET /api/runs/:id/steps?before=SEQ&limit=N`: the step views before a sequence, oldest first. */
export interface StepsPageView {
  steps: StepView[];
  /** Step views still older than the first one here. */
  older: number;
}

/**
 * The timeline of a control-flow run as a tree, built from the recorded rows' paths (and the plan's tree
 * when the pipeline is registered with the UI): the page only draws it.
 */
export type FlowNodeView = FlowStepNodeView | ParallelView | LoopView | BranchView | ForEachView | GroupView;

/**
 * A recorded step row (`sequence` finds its StepView in `RunDetailView.steps`), or a step that failed
 * without a row (`sequence` null, its attempts in `RunDetailView.failedSteps` under the same path).
 */
export interface FlowStepNodeView {
  kind: 'step';
  path: string;
  sequence: number | null;
  status: 'completed' | 'skipped' | 'failed';
}

export interface Span {
  /** Earliest start and latest end of the steps inside (ISO), null when none is recorded. */
  startedAt: string | null;
  completedAt: string | null;
}

export interface ScopeView extends Span {
  /** The key in the brackets: a lane, iteration or item index, or a branch case. */
  key: string;
  /** The scope's path prefix, e.g. `parallel[1]`. */
  path: string;
  children: FlowNodeView[];
}

export interface ParallelView extends Span {
  kind: 'parallel';
  label: string;
  /** The construct's path (`forEach(files)[3]/loop`): unique in the run, unlike its label. */
  path: string;
  lanes: ScopeView[];
}

export interface LoopView extends Span {
  kind: 'loop';
  label: string;
  /** The construct's path (`forEach(files)[3]/loop`): unique in the run, unlike its label. */
  path: string;
  iterations: (ScopeView & { decision: 'stop' | 'continue' | null })[];
  /** Earlier iterations not sent (the newest ones are, up to the answer's limit). */
  hidden: number;
}

export interface BranchView extends Span {
  kind: 'branch';
  label: string;
  /** The construct's path (`forEach(files)[3]/loop`): unique in the run, unlike its label. */
  path: string;
  /** The case the recorded decision chose, null when not decided yet. */
  chosen: string | null;
  cases: ScopeView[];
}

/** `queued`: the item's child run is queued for the fleet and no worker has taken it yet. */
export type ItemStatus = 'completed' | 'skipped' | 'started' | 'queued' | 'failed';

export interface ChildRunView {
  runId: string;
  pipeline: string;
  status: RunStatus;
  updatedAt: string;
}

export interface ForEachItemView extends ScopeView {
  status: ItemStatus;
  /** The child run of this item (a forEach over a @Pipeline), null otherwise or when not created yet. */
  child: ChildRunView | null;
}

export interface ForEachView extends Span {
  kind: 'forEach';
  label: string;
  /** The construct's path (`forEach(files)[3]/loop`): unique in the run, unlike its label. */
  path: string;
  /** Items the recorded item list holds; null before it is recorded. */
  total: number | null;
  /** Each item runs as a child run of a @Pipeline (no steps in this run). */
  childRuns: boolean;
  counts: Record<ItemStatus | 'notRecorded', number>;
  /** The first items in item order, up to the answer's limit (`counts` covers them all). */
  items: ForEachItemView[];
  /** Items recorded and not sent. */
  hidden: number;
}

/** A scope whose construct the UI cannot tell (a named construct of an unregistered pipeline). */
export interface GroupView extends Span {
  kind: 'group';
  label: string;
  /** The construct's path (`forEach(files)[3]/loop`): unique in the run, unlike its label. */
  path: string;
  scopes: ScopeView[];
}

export interface FlowView {
  root: FlowNodeView[];
  /** Child runs that no forEach group claims (listed under the tree). */
  otherChildren: ChildRunView[];
}

/** `GET /api/runs` answer. */
export interface RunListView {
  runs: RunSummaryView[];
  /** True when a listed run is running or waiting: the page keeps refreshing. */
  active: boolean;
  limit: number;
  /** Pipelines registered with the UI (for the filter). */
  pipelines: string[];
}

/** `GET /api/runs/:id/children` answer. */
export interface ChildRunsView {
  parentRunId: string;
  runs: RunSummaryView[];
}

/**
 * `GET /api/runs/:id/checkpoints/:sequence` answer: the state of a run at one sequence. `C` is the checkpoint:
 * the core's PipelineCheckpoint on the server (time-travel.ts), its JSON as the page reads it in the page.
 */
export interface CheckpointViewOf<C> {
  sequence: number;
  oldest: number;
  latest: number;
  /** Key of the step recorded at this sequence, its path in a control-flow run (null at 0, or for a base / patch / decision row). */
  stepKey: string | null;
  checkpoint: C;
}

/**
 * The fields of the core's PipelineCheckpoint (src/core/history/checkpoint-manager.ts) that the page reads, as JSON.
 * The core type cannot be imported here; time-travel.ts checks that its JSON still fits this.
 */
export interface CheckpointJson {
  pipeline_version: string;
  created_at: string;
  checkpoint_sequence: number;
  current_agent_index: number;
  current_step_index: number;
  completed_steps: unknown[];
  shared_context: Record<string, unknown>;
  agent_memory_snapshots: Record<string, unknown>;
  is_terminal: boolean;
}

/** `POST /api/runs/:id/resume` answer, as the page reads it: 202 while it runs in the server, 200 once finished. */
export interface ResumeView {
  accepted?: boolean;
  status?: RunStatus;
  stepsExecuted?: number;
}

/** `POST /api/runs/:id/fork` (and cancel) answer, as the page reads it. */
export interface RunInfoView {
  run: { runId: string };
}

/**
 * One `data:` of `GET /api/runs/:id/stream` (Server-Sent Events, `id:` the offset): a run's stream event
 * exactly as `waypoint.stream` yields it (RunStreamEvent, src/composition/run-stream-reader.ts, which
 * cannot be imported here; stream-endpoint.ts checks that it still fits this).
 */
export type StreamEventView =
  | { offset: number; kind: 'part'; step: string; attempt: number; data: unknown }
  | { offset: number; kind: 'retract'; step: string; attempt: number }
  | { offset: number; kind: 'status'; status: RunStatus; detail?: string };
