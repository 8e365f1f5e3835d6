import { checkpointAt, restoreRun, type PipelineCheckpoint } from '../core/history/checkpoint-manager';
import type { PipelinePlan } from '../core/plan/plan-reader';
import { firstInvalidStep, rowPath, SYSTEM_AGENT, type Integrity } from '../core/history/row-integrity';
import { WaypointError, reasonOf } from '../contract/errors';
import type { CheckpointStore, LoadedRun } from '../contract/checkpoint-store';
import { HttpError } from './errors';
import type { CheckpointJson, CheckpointViewOf } from './api-types';

/** The state of a run at one sequence, as the time-travel view shows it. */
export type CheckpointView = CheckpointViewOf<PipelineCheckpoint>;

/** What JSON.stringify makes of a value of type T: dates become ISO strings. */
type Json<T> = T extends Date ? string : T extends readonly (infer U)[] ? Json<U>[] : T extends object ? { [K in keyof T]: Json<T[K]> } : T;
/** Compiles only when what the server sends (`Sent`) has every field the page reads, with the same type. */
type Fits<Sent extends Read, Read> = [Sent, Read];
// The page reads the checkpoint through api-types.ts's CheckpointJson, which cannot import the core's type: a
// renamed or retyped field of PipelineCheckpoint fails this build instead of the page.
type _PageReadsCheckpoint = Fits<Json<PipelineCheckpoint>, CheckpointJson>;

/**
 * The checkpoint of `loaded` at `sequence`: shared state, agent memories, cursor, completed steps.
 * Sequences run from 0 (the input) or the retention base to the last one. On a run with a corrupted
 * row, the sequences before that row can still be shown (that is where a person forks from); the
 * corrupted one and those after it cannot.
 *
 * @example
 * const view = checkpointView(await store.loadRun('q3-aapl'), 4, {});
 * view.checkpoint.shared_context.facts;
 */
export function checkpointView(loaded: LoadedRun, sequence: number, integrity: Integrity): CheckpointView {
  const { run, steps } = loaded;
  const oldest = steps[0]?.agentId === SYSTEM_AGENT && steps[0].stepName === 'base' ? steps[0].sequence : 0;
  const latest = run.lastSequence;
  if (sequence < oldest || sequence > latest) {
    throw new HttpError(
      404,
      'NO_SUCH_CHECKPOINT',
      `Run '${run.runId}' has checkpoints ${oldest} to ${latest} in the store; sequence ${sequence} is not among them${oldest > 0 ? ' (older ones were folded by retention and are in the archive: waypoint-durable archive restore puts them back)' : ''}. Pick a sequence in that range.`,
      { runId: run.runId },
    );
  }
  const bad = firstInvalidStep(run, steps, integrity);
  let view: LoadedRun = loaded;
  if (bad) {
    const badSequence = bad.sequence;
    if (sequence >= badSequence || bad.index === 0) throw new HttpError(409, 'CHECKPOINT_CORRUPTED', bad.error.message, { runId: run.runId });
    // The valid prefix, read as if its last row were the latest checkpoint; the cursor points at the step
    // of the corrupted (or first missing) row, which is where a resume with onCorruption: 'fallback' would continue.
    const next = steps[bad.index];
    const cursor = next ? { cursorAgent: next.agentIndex, cursorStep: next.stepIndex } : { cursorAgent: run.cursorAgent, cursorStep: run.cursorStep };
    view = {
      run: {
        ...run,
        ...cursor,
        lastSequence: badSequence - 1,
        status: 'paused',
        resumeHint: `Sequence ${badSequence} is corrupted or missing; fork the run from sequence ${badSequence - 1} or earlier to continue from valid checkpoints.`,
      },
      steps: steps.slice(0, bad.index),
    };
  }
  let checkpoint: PipelineCheckpoint;
  try {
    checkpoint = checkpointAt(view.run, view.steps, sequence, integrity);
  } catch (error) {
    if (error instanceof WaypointError && error.code === 'CHECKPOINT_CORRUPTED') throw new HttpError(409, error.code, error.message, { runId: run.runId });
    const reason = error instanceof Error ? error.message : String(error);
    throw new HttpError(
      422,
      'UNREADABLE_CHECKPOINT',
      `Checkpoint ${sequence} of run '${run.runId}' could not be decoded: ${reason}. If the store is encrypted, start the UI with the Waypoint's own store (waypoint.store), which decrypts.`,
      { runId: run.runId },
    );
  }
  const row = steps.find((s) => s.sequence === sequence);
  return { sequence, oldest, latest, stepKey: row && row.agentId !== SYSTEM_AGENT ? rowPath(row) : null, checkpoint };
}

/**
 * The shared state of a control-flow run at `sequence`, replayed through its plan's tree (a run of release
 * 0.1 has no join rows, so only a replay gives its joins and `into`s), child runs read from `store`. Null
 * for a straight line or when the plan is not registered with the UI: the folded rows are the state.
 *
 * @example
 * const state = await flowStateAt(loaded, 12, plan, store, {});
 */
export async function flowStateAt(
  loaded: LoadedRun,
  sequence: number,
  plan: PipelinePlan | undefined,
  store: CheckpointStore,
  integrity: Integrity,
): Promise<Record<string, unknown> | null> {
  if (!plan || plan.linear) return null;
  const childState = async (child: PipelinePlan, runId: string): Promise<Record<string, unknown> | null> => {
    const found = await store.loadRun(runId);
    if (!found || found.run.status !== 'completed') return null;
    return { ...(await restoreRun(child, found, integrity, { replay: true, childState })).state };
  };
  const kept = { run: { ...loaded.run, lastSequence: sequence }, steps: loaded.steps.filter((row) => row.sequence <= sequence) };
  try {
    return { ...(await restoreRun(plan, kept, integrity, { replay: true, childState })).state };
  } catch (error) {
    const reason = reasonOf(error);
    throw new HttpError(
      422,
      'UNREADABLE_CHECKPOINT',
      `The state of control-flow run '${loaded.run.runId}' at sequence ${sequence} could not be replayed through its pipeline: ${reason}. Start the UI with the pipeline of the run's version (--module), or look at the run's steps instead.`,
      { runId: loaded.run.runId },
    );
  }
}
