/**
 * The JSON the page reads from the UI's API, as the browser sees it (dates are ISO strings). The server
 * builds these from src/ui/run-views.ts and src/ui/time-travel.ts; src/ui/page-assets.ts checks at
 * compile time that those views still fit these shapes, so a renamed field fails the build, not the page.
 * Only the fields the page uses are listed.
 */

export type RunStatus = 'running' | 'paused' | 'waiting' | 'completed' | 'failed' | 'cancelled';

export interface ErrorJson {
  name: string;
  message: string;
  code: string | null;
}

export interface ProgressJson {
  done: number;
  total: number | null;
  /** `flow`: a control-flow run, counted from its recorded steps. */
  basis: 'plan' | 'recorded' | 'flow';
}

export interface LeaseJson {
  owner: string;
  expiresAt: string | null;
  expired: boolean;
}

export interface RunSummaryJson {
  runId: string;
  pipeline: string;
  version: string;
  status: RunStatus;
  progress: ProgressJson;
  startedAt: string;
  updatedAt: string;
  lease: LeaseJson | null;
  resumeHint: string | null;
  error: ErrorJson | null;
}

/** `GET /api/runs`. */
export interface RunListJson {
  runs: RunSummaryJson[];
  active: boolean;
  limit: number;
  pipelines: string[];
}

export interface AiUsageJson {
  modelCalls: number;
  inputTokens: number;
  outputTokens: number;
  toolCalls: number;
}

export type StepOrigin = 'executed' | 'restored' | 'copied';

export interface StepJson {
  sequence: number;
  key: string;
  agentId: string;
  agentIndex: number;
  stepIndex: number;
  name: string;
  path: string;
  status: 'completed' | 'skipped' | 'failed';
  startedAt: string;
  completedAt: string;
  durationMs: number;
  attempt: number;
  session: number;
  origin: StepOrigin;
  retried: boolean;
  sideEffectsCommitted: boolean;
  ai: (AiUsageJson & { reused: AiUsageJson }) | null;
}

export interface FailedStepJson {
  key: string;
  agentId: string;
  name: string;
  attempts: number;
  lastError: ErrorJson | null;
  lastAt: string;
}

export interface AttemptJson {
  stepKey: string;
  attempt: number;
  session: number;
  at: string;
  error: ErrorJson | null;
}

/** An operation's state; it doubles as the CSS class of its tag. */
export type OperationState = string;

export interface SideEffectJson {
  stepKey: string;
  name: string;
  state: OperationState;
  attempts: number;
  createdAt: string;
  updatedAt: string;
  error: ErrorJson | null;
}

export interface IntegrityJson {
  status: 'verified' | 'corrupted' | 'unverifiable' | 'empty';
  rows: number;
  seal: 'sha256' | 'hmac' | null;
  sequence: number | null;
  message: string | null;
}

export interface ResumePointJson {
  session: number;
  afterSequence: number;
  beforeSequence: number | null;
  stepKey: string;
  idleFrom: string;
  resumedAt: string;
  gapMs: number;
  reason: 'fork' | 'attempts' | 'gap';
}

export interface SystemRowJson {
  sequence: number;
  kind: string;
  at: string;
}

/** `GET /api/runs/:id`. */
export interface RunDetailJson {
  run: RunSummaryJson & {
    cursor: { agentIndex: number; stepIndex: number };
    createdBy: Record<string, string>;
    forkedFrom: { runId: string; atSequence: number } | null;
    parent: { runId: string; itemIndex: number | null } | null;
  };
  flow: FlowJson | null;
  agents: { id: string; steps: { name: string; key: string }[] }[];
  planKnown: boolean;
  steps: StepJson[];
  failedSteps: FailedStepJson[];
  systemRows: SystemRowJson[];
  sessions: number;
  resumePoints: ResumePointJson[];
  attempts: AttemptJson[];
  sideEffects: SideEffectJson[];
  signals: { name: string; at: string }[];
  integrity: IntegrityJson;
  checkpoints: { oldest: number; latest: number };
  actions: { allowed: boolean; resume: boolean; cancel: boolean; fork: boolean };
}

/** The control-flow tree of a run (src/ui/flow-view.ts). */
export type FlowNodeJson = FlowStepJson | ParallelJson | LoopJson | BranchJson | ForEachJson | GroupJson;

export interface FlowStepJson {
  kind: 'step';
  path: string;
  /** Null for a step that failed without a row (its attempts are in `failedSteps`). */
  sequence: number | null;
  status: 'completed' | 'skipped' | 'failed';
}

export interface SpanJson {
  startedAt: string | null;
  completedAt: string | null;
}

export interface ScopeJson extends SpanJson {
  key: string;
  path: string;
  children: FlowNodeJson[];
}

export interface ParallelJson extends SpanJson {
  kind: 'parallel';
  label: string;
  path: string;
  lanes: ScopeJson[];
}

export interface LoopJson extends SpanJson {
  kind: 'loop';
  label: string;
  path: string;
  iterations: (ScopeJson & { decision: 'stop' | 'continue' | null })[];
}

export interface BranchJson extends SpanJson {
  kind: 'branch';
  label: string;
  path: string;
  chosen: string | null;
  cases: ScopeJson[];
}

export type ItemStatus = 'completed' | 'skipped' | 'started' | 'queued' | 'failed';

export interface ChildRunJson {
  runId: string;
  pipeline: string;
  status: RunStatus;
  updatedAt: string;
}

export interface ForEachItemJson extends ScopeJson {
  status: ItemStatus;
  child: ChildRunJson | null;
}

export interface ForEachJson extends SpanJson {
  kind: 'forEach';
  label: string;
  path: string;
  total: number | null;
  childRuns: boolean;
  counts: Record<ItemStatus | 'notRecorded', number>;
  items: ForEachItemJson[];
}

export interface GroupJson extends SpanJson {
  kind: 'group';
  label: string;
  path: string;
  scopes: ScopeJson[];
}

export interface FlowJson {
  root: FlowNodeJson[];
  otherChildren: ChildRunJson[];
}

/** `GET /api/runs/:id/checkpoints/:sequence`. */
export interface CheckpointJson {
  checkpoint: {
    pipeline_version: string;
    created_at: string;
    checkpoint_sequence: number;
    current_agent_index: number;
    current_step_index: number;
    completed_steps: unknown[];
    shared_context: Record<string, unknown>;
    agent_memory_snapshots: Record<string, unknown>;
    is_terminal: boolean;
  };
}

/** `POST /api/runs/:id/resume`: 202 while it runs in the server, 200 once finished. */
export interface ResumeJson {
  accepted?: boolean;
  status?: RunStatus;
  stepsExecuted?: number;
}

/** `POST /api/runs/:id/fork` (and cancel). */
export interface RunInfoJson {
  run: { runId: string };
}
