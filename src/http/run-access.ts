import type { RunRecord } from '../contract/checkpoint-store';
import { RUN_QUEUE } from '../contract/run-queue';
import { TOKENS } from '../contract/tokens';
import { deserialize } from '../core/state/value-decoder';
import { HttpError } from './errors';
import type { AuthorizeContext, ResolvedHttpOptions } from './options';

/** The run metadata key that holds the tenant a run was created under. */
export const TENANT_KEY = 'tenant';

/** What `authorize` allowed: `null` is no tenant (every run visible), a string scopes to that tenant. */
export interface Grant {
  tenant: string | null;
}

/** Calls `authorize`; 401 unless it allowed the request. */
export async function authorizeRequest(options: ResolvedHttpOptions, request: Request, context: AuthorizeContext): Promise<Grant> {
  const decision = await options.authorize(request, context);
  if (decision === true) return { tenant: null };
  if (decision && typeof decision === 'object' && typeof decision.tenant === 'string' && decision.tenant !== '') return { tenant: decision.tenant };
  throw new HttpError(401, 'UNAUTHORIZED', `The request to ${context.action} was not authorized; send the credentials your app's authorize function checks.`, {
    runId: context.runId,
  });
}

/** The tenant stored with a run, or null. */
export function tenantOf(run: RunRecord): string | null {
  try {
    const meta = deserialize<Record<string, unknown> | null>(run.metadata);
    const tenant = meta?.[TENANT_KEY];
    return typeof tenant === 'string' ? tenant : null;
  } catch {
    return null;
  }
}

/** True when `grant` may see `run`: no tenant sees every run, a tenant sees only its own. */
export function visible(grant: Grant, run: RunRecord): boolean {
  return grant.tenant === null || tenantOf(run) === grant.tenant;
}

/** The same 404 for a run that does not exist and one the caller may not see, so ids cannot be probed. */
export function runNotFound(runId: string): HttpError {
  return new HttpError(404, 'RUN_NOT_FOUND', `No run '${runId}' is visible here; check the run id (and that you are signed in to its account).`, { runId });
}

/**
 * Loads run `runId`, asks `authorize`, and answers 404 when the run does not exist, is of a pipeline this
 * handler does not serve, or belongs to another tenant (in that order of checks, each the same answer).
 */
export async function accessRun(
  options: ResolvedHttpOptions,
  request: Request,
  runId: string,
  context: Omit<AuthorizeContext, 'runId' | 'pipeline'>,
): Promise<{ run: RunRecord; grant: Grant }> {
  const run = await options.waypoint.store.getRun(runId);
  const grant = await authorizeRequest(options, request, { ...context, runId, pipeline: run?.pipelineName });
  if (!run || !options.pipelines.has(run.pipelineName) || !visible(grant, run)) throw runNotFound(runId);
  return { run, grant };
}

/** True when the Waypoint has a run queue bound: runs are started and woken through the fleet. */
export function hasFleet(options: ResolvedHttpOptions): boolean {
  return options.waypoint.container.isBound(RUN_QUEUE);
}

/** The Waypoint's `hmacKey`, as approval tokens are signed with by default. */
export function waypointHmacKey(options: ResolvedHttpOptions): Buffer | undefined {
  const key = options.waypoint.container.get(TOKENS.Options).hmacKey;
  if (key === undefined) return undefined;
  return Buffer.isBuffer(key) ? key : Buffer.from(key, 'utf8');
}
