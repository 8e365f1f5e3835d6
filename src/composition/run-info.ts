/*
 * What the facade turns records into and out of: a stored run as `get` / `list` show it, and a run's
 * input as it is stored.
 */
import { TERMINAL_STATUSES, type RunFilter, type RunRecord, type RunStatus } from '../contract/checkpoint-store';
import type { PipelinePlan } from '../core/plan/plan-reader';
import type { RunProgress } from '../core/history/run-progress';
import { assertStorableDepth, serialize, serializeLegacyForm } from '../core/state/serializer';
import { deserialize } from '../core/state/value-decoder';
import { createState } from '../core/state/state-schema';
import { checkedInput } from '../core/plan/strict-state';
import { whyUndecodable } from '../core/history/row-decoding';
import { UndecodableValueError } from '../contract/errors';
import { ENVELOPE_PREFIX } from '../storage/payload-cipher';

/** What `list` filters on: the store's filter, and whether the items of distributed forEach bodies are shown. */
export interface ListFilter extends RunFilter {
  /** Show the hidden item runs of `forEach(..., { distribute: true })` over an agent or a sequence. Default false. */
  includeItems?: boolean;
}

/** A stored run as `get` / `list` show it. */
export interface RunInfo {
  runId: string;
  pipeline: string;
  version: string;
  status: RunStatus;
  cursor: { agentIndex: number; stepIndex: number };
  lastSequence: number;
  error: unknown;
  resumeHint: string | null;
  leaseOwner: string | null;
  createdAt: Date;
  updatedAt: Date;
  /**
   * Steps recorded of steps known so far (and forEach items), the figures the CLI and the page show: see
   * `RunProgress`. `planned` counts from the pipeline registered with this Waypoint when its version is the
   * run's, else from the rows alone (null until the run completes).
   *
   * @example
   * const { progress } = (await waypoint.get('q3-aapl'))!; // { recorded: 7, planned: 12, items: { done: 2, total: 4 } }
   */
  progress: RunProgress;
}

/**
 * The stored form of a run's input: the state class's defaults overwritten by the input, as plain data.
 * Storing it (not the raw input) makes every reader, including the plan-less read model, see the state
 * the first step saw.
 */
export function initialState(plan: PipelinePlan, runId: string, input: unknown, strict: boolean): string {
  return initialStates(plan, runId, input, strict).text;
}

/**
 * Whether `input` is the input run `stored` was started with: its stored text, or (for a run an earlier
 * release started, which wrote an array's holes as null) that text in their form.
 */
export function sameInput(plan: PipelinePlan, runId: string, input: unknown, strict: boolean, stored: string): boolean {
  const { text, legacy } = initialStates(plan, runId, input, strict);
  return text === stored || legacy() === stored;
}

function initialStates(plan: PipelinePlan, runId: string, input: unknown, strict: boolean): { text: string; legacy: () => string } {
  // class-transformer recurses once per level: a value past the depth limit is refused before it gets there.
  assertStorableDepth(input, { runId, what: 'input' });
  const state = createState(plan.state, checkedInput(plan, strict, input, runId), { runId });
  return { text: serialize({ ...state }, { runId, what: 'input' }), legacy: () => serializeLegacyForm({ ...state }, { runId, what: 'input' }) };
}

export function toInfo(run: RunRecord, progress: RunProgress): RunInfo {
  return {
    runId: run.runId,
    pipeline: run.pipelineName,
    version: run.pipelineVersion,
    status: run.status,
    cursor: { agentIndex: run.cursorAgent, stepIndex: run.cursorStep },
    lastSequence: run.lastSequence,
    error: run.error === null ? null : storedError(run.runId, run.error),
    resumeHint: run.resumeHint,
    leaseOwner: TERMINAL_STATUSES.has(run.status) ? null : run.leaseOwner,
    createdAt: run.createdAt,
    updatedAt: run.updatedAt,
    progress,
  };
}

/**
 * A run's stored error as `get` / `list` show it. One that cannot be read here (encrypted while this Waypoint
 * has no key, or altered) becomes an error object saying why and what to do, so that one unreadable run
 * never makes the whole list fail.
 */
function storedError(runId: string, text: string): unknown {
  if (text.startsWith(ENVELOPE_PREFIX)) {
    const keyId = text.slice(ENVELOPE_PREFIX.length).split(':')[0];
    return unreadable(
      `The error stored for run '${runId}' is encrypted (key id '${keyId}') and this Waypoint has no encryption key: open the store with the \`encryption\` option it was written with to read it.`,
    );
  }
  try {
    return deserialize(text);
  } catch (error) {
    if (!(error instanceof UndecodableValueError)) throw error;
    return unreadable(`The error stored for run '${runId}' cannot be read: ${whyUndecodable(error)}. Run waypoint.verify('${runId}') to see whether the run's rows were altered.`);
  }
}

function unreadable(message: string): { name: string; code: string; message: string } {
  return { name: 'UnreadableStoredError', code: 'UNSERIALIZABLE_VALUE', message };
}
