import { randomUUID } from 'node:crypto';
import { TERMINAL_STATUSES } from '../contract/checkpoint-store';
import { checkSignalName } from '../contract/signal-rules';
import { StreamsUnsupportedError } from '../contract/errors';
import { supportsStreams } from '../contract/run-stream';
import { checkRunId } from '../core/run/run-id';
import { HttpError } from './errors';
import type { ResolvedHttpOptions } from './options';
import { checkOrigin, json, onlyFields, readJson } from './request-io';
import { accessRun, authorizeRequest, hasFleet, TENANT_KEY, visible } from './run-access';
import type { RunStarter } from './run-starter';
import { streamResponse } from './sse';
import { sseStartOffset } from './sse-format';
import { runView } from './run-view';

/** What each route handler gets. */
export interface RouteContext {
  options: ResolvedHttpOptions;
  starter: RunStarter;
  request: Request;
  url: URL;
}

/**
 * `POST /runs` `{ pipeline, runId?, input }`: creates the run and starts it (the fleet's queue, or this
 * process in the background), answering at once with `{ runId, status }`: 201 when created, 200 when the
 * same run already existed (same input), 409 INPUT_MISMATCH for another input.
 */
export async function startRun({ options, starter, request, url }: RouteContext): Promise<Response> {
  checkOrigin(request, url, options.allowedOrigins);
  const body = await readJson(request, options.maxBodyBytes);
  // Credentials first: a caller without them learns nothing from the body's checks.
  const named = (value: unknown) => (typeof value === 'string' ? value : undefined);
  const grant = await authorizeRequest(options, request, { action: 'start', runId: named(body.runId), pipeline: named(body.pipeline) });
  onlyFields(body, ['pipeline', 'runId', 'input']);
  if (typeof body.pipeline !== 'string' || body.pipeline === '') throw new HttpError(400, 'BAD_BODY', "The body needs 'pipeline': the name of the pipeline to start, as a string.");
  const runId = body.runId === undefined ? randomUUID() : checkRunId(body.runId, "The body's runId");
  const spec = options.pipelines.get(body.pipeline);
  if (!spec)
    throw new HttpError(
      400,
      'UNKNOWN_PIPELINE',
      `Pipeline '${body.pipeline.slice(0, 100)}' cannot be started here; use one of ${[...options.pipelines.keys()].map((n) => `'${n}'`).join(', ')}.`,
    );
  const existing = await options.waypoint.store.getRun(runId);
  if (existing && (!visible(grant, existing) || existing.pipelineName !== body.pipeline)) {
    throw new HttpError(409, 'RUN_ID_TAKEN', `Run id '${runId}' is taken; start the run under another id (or omit runId to get a fresh one).`, { runId });
  }
  const metadata: Record<string, string> = grant.tenant === null ? {} : { [TENANT_KEY]: grant.tenant };
  const input = (body.input ?? {}) as Record<string, unknown>;
  if (hasFleet(options) && !existing) {
    const queued = await options.waypoint.enqueue(spec.pipeline, { runId, input, metadata });
    return json(queued.created ? 201 : 200, { runId, status: queued.status });
  }
  // An existing run is checked (same pipeline and input), never started again: a failed run is not retried by a repeated POST.
  const { run, created } = await options.waypoint.prepare(spec.pipeline, { runId, input }, metadata);
  if (created || (run.status === 'paused' && !hasFleet(options))) starter.start(spec.pipeline, runId, input);
  return json(created ? 201 : 200, { runId, status: run.status });
}

/** `GET /runs/:id`: status, progress, the signals it waits for, and what its pipeline's `clientView` allows. */
export async function readRun({ options, request }: RouteContext, runId: string): Promise<Response> {
  const { run } = await accessRun(options, request, runId, { action: 'read' });
  return json(200, await runView(options, run));
}

/** `GET /runs/:id/stream[?from=N]`: the run's stream as Server-Sent Events (`Last-Event-ID` resumes it). */
export async function streamRun({ options, request, url }: RouteContext, runId: string): Promise<Response> {
  for (const key of url.searchParams.keys()) {
    if (key !== 'from') throw new HttpError(400, 'BAD_QUERY', `Unknown query parameter '${key.slice(0, 40)}'; the stream accepts only 'from'.`);
  }
  const from = sseStartOffset(request.headers.get('last-event-id'), url.searchParams.get('from'));
  await accessRun(options, request, runId, { action: 'stream' });
  const store = options.waypoint.store;
  if (!supportsStreams(store)) throw new StreamsUnsupportedError(runId, store.constructor.name);
  return streamResponse(options.waypoint, runId, from, options.heartbeatMs, request.signal);
}

/** `POST /runs/:id/signals/:name` `{ payload? }`: delivers the signal (first delivery wins) and wakes a waiting run. */
export async function signalRun({ options, starter, request, url }: RouteContext, runId: string, name: string): Promise<Response> {
  checkOrigin(request, url, options.allowedOrigins);
  checkSignalName(name, { runId });
  const { run } = await accessRun(options, request, runId, { action: 'signal', signal: name });
  const body = await readJson(request, options.maxBodyBytes);
  onlyFields(body, ['payload']);
  const delivered = await options.waypoint.signal(runId, name, body.payload);
  if (delivered) await wakeIfWaiting(options, starter, runId, run.pipelineName);
  return json(200, { runId, signal: name, delivered });
}

/** `POST /runs/:id/cancel`: the stop button; the run is cancelled (fenced) and its stream ends with `cancelled`. */
export async function cancelRun({ options, request, url }: RouteContext, runId: string): Promise<Response> {
  checkOrigin(request, url, options.allowedOrigins);
  await accessRun(options, request, runId, { action: 'cancel' });
  const body = await readJson(request, options.maxBodyBytes);
  onlyFields(body, []);
  const info = await options.waypoint.cancel(runId, 'cancelled over HTTP');
  return json(200, { runId, status: info.status });
}

/** After a signal: a run suspended as `waiting` is moved on (a run still holding for it takes it itself). */
export async function wakeIfWaiting(options: ResolvedHttpOptions, starter: RunStarter, runId: string, pipelineName: string): Promise<void> {
  const now = await options.waypoint.store.getRun(runId);
  const spec = options.pipelines.get(pipelineName);
  if (now?.status === 'waiting' && spec && !TERMINAL_STATUSES.has(now.status)) await starter.wake(spec.pipeline, runId);
}
