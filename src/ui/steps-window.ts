import { HttpError } from './errors';
import { onlyKeys } from './http-io';
import type { FlowNodeView, FlowView, SideEffectView, StepView, StepsPageView, StepsWindow } from './api-types';

/** How much of a long run one detail answer carries: the newest `steps` step views, or those after `since`. */
export interface WindowQuery {
  steps: number;
  since: number | null;
}

/** Step views (and side effects) a detail answer carries by default: a first screen, not a 20,000-row run. */
export const DEFAULT_STEPS = 500;
const MAX_STEPS = 5_000;

/** Everything of the run: what library callers of `runDetail` without a window get. */
export const WHOLE_RUN: WindowQuery = { steps: Number.POSITIVE_INFINITY, since: null };

/**
 * The part of a run's step views and side effects to send. With `since`, the steps recorded after it (to
 * append to what the page holds), unless more than `steps` of them are new: then the newest `steps`, to
 * replace what it holds (`since` answered as null).
 *
 * @example
 * windowOf(views, effects, { steps: 500, since: 19_990 }); // the 10 newest steps, window.since 19990
 */
export function windowOf(
  views: readonly StepView[],
  effects: readonly SideEffectView[],
  query: WindowQuery,
): { steps: StepView[]; sideEffects: SideEffectView[]; window: StepsWindow } {
  const sideEffects = effects.slice(Math.max(0, effects.length - query.steps));
  const olderSideEffects = effects.length - sideEffects.length;
  if (query.since !== null) {
    const since = query.since;
    const fresh = views.filter((v) => v.sequence > since);
    if (fresh.length <= query.steps) return { steps: fresh, sideEffects, window: { total: views.length, older: 0, since, olderSideEffects } };
  }
  const first = Math.max(0, views.length - query.steps);
  return { steps: views.slice(first), sideEffects, window: { total: views.length, older: first, since: null, olderSideEffects } };
}

/** The step views before sequence `before`, the newest `limit` of them, oldest first. */
export function stepsBefore(views: readonly StepView[], before: number, limit: number): StepsPageView {
  const earlier = views.filter((v) => v.sequence < before);
  const first = Math.max(0, earlier.length - limit);
  return { steps: earlier.slice(first), older: first };
}

/** `?steps=N&since=S` of `GET /api/runs/:id`, validated. */
export function parseWindowQuery(params: URLSearchParams): WindowQuery {
  onlyKeys('query', params.keys(), ['steps', 'since']);
  return { steps: countParam(params, 'steps') ?? DEFAULT_STEPS, since: sequenceParam(params, 'since') };
}

/** `?before=SEQ&limit=N` of `GET /api/runs/:id/steps`, validated. */
export function parseStepsPageQuery(params: URLSearchParams): { before: number; limit: number } {
  onlyKeys('query', params.keys(), ['before', 'limit']);
  const before = sequenceParam(params, 'before');
  if (before === null) throw new HttpError(400, 'BAD_QUERY', "Query parameter 'before' is required: the sequence of the oldest step the page holds.");
  return { before, limit: countParam(params, 'limit') ?? DEFAULT_STEPS };
}

function single(params: URLSearchParams, name: string): string | null {
  const values = params.getAll(name);
  if (values.length > 1) throw new HttpError(400, 'BAD_QUERY', `Query parameter '${name}' was given ${values.length} times; give it once.`);
  return values[0] ?? null;
}

function countParam(params: URLSearchParams, name: string): number | null {
  const text = single(params, name);
  if (text === null) return null;
  if (!/^\d{1,5}$/.test(text) || Number(text) < 1 || Number(text) > MAX_STEPS) {
    throw new HttpError(400, 'BAD_QUERY', `Query parameter '${name}' must be an integer from 1 to ${MAX_STEPS}; got '${text.slice(0, 40)}'.`);
  }
  return Number(text);
}

function sequenceParam(params: URLSearchParams, name: string): number | null {
  const text = single(params, name);
  if (text === null) return null;
  if (!/^\d{1,15}$/.test(text)) throw new HttpError(400, 'BAD_QUERY', `Query parameter '${name}' must be a step sequence (a non-negative integer); got '${text.slice(0, 40)}'.`);
  return Number(text);
}

/** The step views a flow tree refers to that the window did not carry (none with `since`: the page holds them). */
export function flowStepsOf(flow: FlowView | null, views: readonly StepView[], sent: readonly StepView[], window: StepsWindow): StepView[] {
  if (flow === null || window.since !== null) return [];
  const wanted = new Set<number>();
  const walk = (nodes: readonly FlowNodeView[]): void => {
    for (const n of nodes) {
      if (n.kind === 'step') {
        if (n.sequence !== null) wanted.add(n.sequence);
      } else if (n.kind === 'parallel') n.lanes.forEach((l) => walk(l.children));
      else if (n.kind === 'loop') n.iterations.forEach((l) => walk(l.children));
      else if (n.kind === 'branch') n.cases.forEach((l) => walk(l.children));
      else if (n.kind === 'group') n.scopes.forEach((l) => walk(l.children));
      else n.items.forEach((l) => walk(l.children));
    }
  };
  walk(flow.root);
  sent.forEach((v) => wanted.delete(v.sequence));
  return views.filter((v) => wanted.has(v.sequence));
}
