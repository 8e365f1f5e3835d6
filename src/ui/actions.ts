import { setTimeout as sleep } from 'node:timers/promises';
import { checkSignalName } from '../contract/signal-rules';
import { RunNotFoundError, WaypointError } from '../contract/errors';
import type { Logger } from '../contract/logger';
import type { RunInfo, Waypoint } from '../composition/waypoint';
import { HttpError } from './errors';
import { onlyKeys } from './http-io';

/** Outcome of an action: HTTP status and JSON body. */
export interface ActionResponse {
  status: number;
  body: unknown;
}

/**
 * The page's write actions, through the Waypoint facade (so leases, fencing and lifecycle rules are
 * the runtime's own). A resume runs in this process; it is answered as soon as it settles or, for a
 * longer run, after `settleMs` with 202 while it continues in the background. Closing the server
 * pauses background resumes at their next step boundary and waits for them.
 */
export class UiActions {
  private readonly resuming = new Map<string, { controller: AbortController; done: Promise<void> }>();

  constructor(
    private readonly waypoint: Waypoint,
    private readonly logger: Logger,
    private readonly settleMs = 300,
  ) {}

  async resume(runId: string, body: Record<string, unknown>): Promise<ActionResponse> {
    onlyKeys('body', Object.keys(body), []);
    if (this.resuming.has(runId)) {
      throw new HttpError(409, 'RESUME_IN_PROGRESS', `Run '${runId}' is already being resumed by this UI server; wait for it to finish or pause.`, { runId });
    }
    if (!(await this.waypoint.get(runId))) throw new RunNotFoundError(runId);
    const controller = new AbortController();
    const running = this.waypoint.resume(runId, { signal: controller.signal });
    const done = running.then(
      (result) => this.logger.info('ui resume finished', { runId, status: result.status, stepsExecuted: result.stepsExecuted }),
      (error: unknown) =>
        this.logger.error('ui resume failed', { runId, code: error instanceof WaypointError ? error.code : null, error: error instanceof Error ? error.message : String(error) }),
    );
    const entry = { controller, done: done.finally(() => this.resuming.delete(runId)) };
    this.resuming.set(runId, entry);
    const settled = await Promise.race([
      running.then(
        (result) => ({ result }),
        (error: unknown) => ({ error }),
      ),
      sleep(this.settleMs).then(() => null),
    ]);
    if (settled === null) return { status: 202, body: { accepted: true, runId, message: `Run '${runId}' is resuming in the UI server's process.` } };
    if ('error' in settled) throw settled.error;
    const r = settled.result;
    return { status: 200, body: { runId, status: r.status, stepsExecuted: r.stepsExecuted, stepsSkipped: r.stepsSkipped, lastSequence: r.lastSequence } };
  }

  async cancel(runId: string, body: Record<string, unknown>): Promise<ActionResponse> {
    onlyKeys('body', Object.keys(body), ['reason']);
    const reason = body.reason ?? 'cancelled from the Waypoint UI';
    if (typeof reason !== 'string' || reason.length === 0 || reason.length > 500) throw new HttpError(400, 'BAD_BODY', "'reason' must be a string of 1 to 500 characters.");
    const run = await this.waypoint.cancel(runId, reason);
    return { status: 200, body: { run: infoJson(run) } };
  }

  async fork(runId: string, body: Record<string, unknown>): Promise<ActionResponse> {
    onlyKeys('body', Object.keys(body), ['newRunId', 'fromStep', 'fromSequence']);
    const { newRunId, fromStep, fromSequence } = body;
    if (typeof newRunId !== 'string' || newRunId.length === 0 || newRunId.length > 200) {
      throw new HttpError(400, 'BAD_BODY', "'newRunId' is required: the id of the new run, 1 to 200 characters.");
    }
    if (fromStep !== undefined && fromSequence !== undefined) throw new HttpError(400, 'BAD_BODY', "Give either 'fromStep' or 'fromSequence', not both.");
    if (fromStep !== undefined && (typeof fromStep !== 'string' || fromStep.length === 0 || fromStep.length > 400)) {
      throw new HttpError(400, 'BAD_BODY', "'fromStep' must be a step key ('agentId/stepName') or a unique step name.");
    }
    if (fromSequence !== undefined && !(typeof fromSequence === 'number' && Number.isInteger(fromSequence) && fromSequence >= 0)) {
      throw new HttpError(400, 'BAD_BODY', "'fromSequence' must be a non-negative integer.");
    }
    const run = await this.waypoint.fork(runId, { newRunId, fromStep: fromStep, fromSequence: fromSequence });
    return { status: 201, body: { run: infoJson(run) } };
  }

  /**
   * Delivers signal `name` with `payload` (any JSON value, optional) to a run. The name's rule and the
   * payload limit are the facade's (400 INVALID_SIGNAL_NAME, 413 SIGNAL_PAYLOAD_TOO_LARGE), checked before
   * anything is stored. 200 `{ delivered: false }` when the signal had already been delivered.
   */
  async signal(runId: string, body: Record<string, unknown>): Promise<ActionResponse> {
    onlyKeys('body', Object.keys(body), ['name', 'payload']);
    const { name, payload } = body;
    checkSignalName(name, { runId });
    const delivered = await this.waypoint.signal(runId, name, payload);
    return { status: 200, body: { runId, name, delivered } };
  }

  /** Pauses background resumes (at their next step boundary) and waits until they have stopped. */
  async close(): Promise<void> {
    const entries = [...this.resuming.values()];
    for (const entry of entries) entry.controller.abort('the Waypoint UI server is closing');
    await Promise.all(entries.map((e) => e.done));
  }
}

function infoJson(run: RunInfo): Record<string, unknown> {
  return { ...run, createdAt: run.createdAt.toISOString(), updatedAt: run.updatedAt.toISOString() };
}
