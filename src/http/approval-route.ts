import type { Waypoint } from '../composition/waypoint';
import { TERMINAL_STATUSES } from '../contract/checkpoint-store';
import { signApprovalToken, verifyApprovalToken, type ApprovalLinkOptions } from '../core/step/approval-token';
import { signalKey } from '../core/step/durable-waits';
import { HttpError } from './errors';
import { checkOrigin, json, onlyFields, readJson } from './request-io';
import { authorizeRequest, runNotFound, visible, waypointHmacKey } from './run-access';
import { wakeIfWaiting, type RouteContext } from './run-routes';

/**
 * `POST /approve/:token`: delivers the one signal the token names to the one run it names, once. A
 * tampered or malformed token, one signed with another key and one for another run (a later run under
 * the same id) answer 403 APPROVAL_LINK_INVALID; an expired one 410 APPROVAL_LINK_EXPIRED; one whose
 * signal was already delivered (the link used, or the decision made otherwise) 410 APPROVAL_LINK_USED.
 * Nothing is delivered in any of these cases.
 */
export async function approve({ options, starter, request, url }: RouteContext, token: string): Promise<Response> {
  checkOrigin(request, url, options.allowedOrigins);
  const key = options.approvalKey ?? waypointHmacKey(options);
  if (!key) throw new HttpError(404, 'APPROVAL_LINK_INVALID', 'This server signs no approval links (no approvalKey or hmacKey is configured); ask for a new link.');
  const checked = verifyApprovalToken(key, token);
  if ('problem' in checked) {
    if (checked.problem === 'expired') throw new HttpError(410, 'APPROVAL_LINK_EXPIRED', 'This approval link has expired and delivers nothing; ask for a new link.');
    throw invalid();
  }
  const { runId, signal, payload } = checked.claim;
  const run = await options.waypoint.store.getRun(runId);
  const grant = await authorizeRequest(options, request, { action: 'approve', runId, pipeline: run?.pipelineName, signal });
  if (!run || !options.pipelines.has(run.pipelineName)) throw invalid();
  if (!visible(grant, run)) throw runNotFound(runId);
  // A run created later under the same id is another run: the token names the creation time too.
  if (run.createdAt.toISOString() !== checked.created) throw invalid();
  onlyFields(await readJson(request, options.maxBodyBytes), []);
  if (await options.waypoint.store.getOperation(signalKey(runId, signal))) throw used(runId);
  if (TERMINAL_STATUSES.has(run.status)) {
    throw new HttpError(410, 'RUN_FINISHED', `Run '${runId}' is ${run.status}; this approval link can no longer change it. Nothing was delivered.`, { runId });
  }
  if (!(await options.waypoint.signal(runId, signal, payload))) throw used(runId);
  await wakeIfWaiting(options, starter, runId, run.pipelineName);
  return json(200, { runId, signal, delivered: true });
}

/**
 * An approval token signed with the handler's own `approvalKey` (`waypoint.approvalLink` signs with the
 * Waypoint's `hmacKey`): put it in a URL ending in `/approve/<token>` under the handler's basePath.
 *
 * @example
 * const token = await createApprovalToken(waypoint, process.env.APPROVAL_KEY!, 'invoice-7', 'approval', { expiresIn: '48h' });
 */
export function createApprovalToken(waypoint: Waypoint, key: string | Buffer, runId: string, signal: string, options: ApprovalLinkOptions): Promise<string> {
  return signApprovalToken(waypoint.store, Buffer.isBuffer(key) ? key : Buffer.from(key, 'utf8'), runId, signal, options);
}

function invalid(): HttpError {
  return new HttpError(
    403,
    'APPROVAL_LINK_INVALID',
    'This approval link is not valid here (altered, signed with another key, or for another run) and delivers nothing; ask for a new link.',
  );
}

function used(runId: string): HttpError {
  return new HttpError(410, 'APPROVAL_LINK_USED', `The decision this approval link carries was already delivered to run '${runId}'; nothing more was delivered.`, { runId });
}
