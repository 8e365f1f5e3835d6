import type { RunRecord } from '../contract/checkpoint-store';
import type { ResolvedHttpOptions } from './options';

/** What `GET /runs/:id` answers. */
export interface HttpRunView {
  runId: string;
  pipeline: string;
  status: RunRecord['status'];
  progress: unknown;
  /** Signals the run waits for (a `waiting` run). */
  waitingFor: string[];
  createdAt: string;
  updatedAt: string;
  /** The failed run's error code, when it has one (never its message or stack: they may hold data). */
  errorCode?: string;
  /** The pipeline's `clientView` of the latest state (absent without one). */
  view?: unknown;
  /** The same, once the run completed. */
  result?: unknown;
}

/** The client's view of a run: status and progress always; state only through its pipeline's `clientView`. */
export async function runView(options: ResolvedHttpOptions, run: RunRecord): Promise<HttpRunView> {
  const info = (await options.waypoint.get(run.runId)) ?? null;
  const status = info?.status ?? run.status;
  const view: HttpRunView = {
    runId: run.runId,
    pipeline: run.pipelineName,
    status,
    progress: info?.progress ?? null,
    waitingFor: status === 'waiting' ? waitingSignals(info?.resumeHint ?? run.resumeHint) : [],
    createdAt: run.createdAt.toISOString(),
    updatedAt: (info?.updatedAt ?? run.updatedAt).toISOString(),
  };
  const code = errorCodeOf(info?.error);
  if (status === 'failed' && code !== undefined) view.errorCode = code;
  const clientView = options.pipelines.get(run.pipelineName)?.clientView;
  if (clientView && info) {
    const checkpoint = await options.waypoint.checkpoint(run.runId);
    view.view = clientView(checkpoint.shared_context, info);
    if (status === 'completed') view.result = view.view;
  }
  return view;
}

/** The signal a waiting run's resume hint names ("... for signal 'approval'"). */
function waitingSignals(hint: string | null): string[] {
  const names = [...(hint ?? '').matchAll(/for signal '([^']+)'/g)].map((m) => m[1]);
  return [...new Set(names)];
}

function errorCodeOf(error: unknown): string | undefined {
  if (error && typeof error === 'object' && typeof (error as { code?: unknown }).code === 'string') return (error as { code: string }).code;
  return undefined;
}
