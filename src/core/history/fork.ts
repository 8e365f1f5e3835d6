import { joinsEntry } from '../flow/join-rows';
import type { CheckpointStore, Fence, RunRecord, StepRecord } from '../../contract/checkpoint-store';
import { linkOf, rowPath, runIdentity, SYSTEM_AGENT, stepDigest, systemRow, verifySteps, type Integrity } from './row-integrity';
import { undecodableInput, undecodableRows } from './row-decoding';
import { rowsNeedThePipeline } from './flow-base';
import type { Clock } from '../../contract/clock';
import { CheckpointCorruptedError, RunNotFoundError, WaypointError } from '../../contract/errors';
import { resumeHintFor } from '../run/run-status';
import { serialize } from '../state/serializer';

/** Options of `waypoint.fork`. */
export interface ForkOptions {
  /** The new run's id; must not exist yet. */
  newRunId: string;
  /** Keep the source's checkpoints 1..fromSequence (0 = none). */
  fromSequence?: number;
  /** Re-run from this step: keep every checkpoint before it (`agentId/stepName` or a unique step name). */
  fromStep?: string;
  /** Shallow changes to the shared state, recorded as a patch row before the first new step. */
  patchState?: Record<string, unknown>;
  /**
   * With control flow: the path of the step whose state the patch changes (the patch applies where that
   * step runs: in its branch, item or iteration). Default: `fromStep`, else the first recorded step after
   * the fork point. Needed when forking at the end of a failed run, whose failed step has no row.
   */
  patchBefore?: string;
}

/**
 * Starts a new run from a point in an existing one: the rows before that point are copied (re-keyed and
 * re-hashed for the new run), the optional patch is recorded, and the new run is left `paused`, ready to
 * resume. The source run is only read.
 */
export async function forkRun(
  store: CheckpointStore,
  clock: Clock,
  workerId: string,
  sourceRunId: string,
  options: ForkOptions,
  integrity: Integrity = {},
): Promise<{ sequence: number }> {
  const loaded = await store.loadRun(sourceRunId);
  if (!loaded) throw new RunNotFoundError(sourceRunId);
  verifySteps(loaded.run, loaded.steps, integrity);
  const upTo = forkPoint(sourceRunId, loaded.steps, options);
  // A fork of rows this process cannot read would be a run that can never resume: refuse it, naming the row.
  const input = undecodableInput(loaded.run);
  if (input !== null) throw new CheckpointCorruptedError(sourceRunId, 0, input);
  const [undecodable] = undecodableRows(
    loaded.run,
    loaded.steps.filter((s) => s.sequence <= upTo),
  );
  if (undecodable) throw undecodable.error;
  const patchPath = options.patchState && rowsNeedThePipeline(loaded.steps) ? patchPathOf(sourceRunId, loaded.steps, upTo, options) : null;
  const { run } = loaded;
  const created = await store.createRun({
    runId: options.newRunId,
    pipelineName: run.pipelineName,
    pipelineVersion: run.pipelineVersion,
    input: run.input,
    metadata: serialize({ forkedFrom: sourceRunId, atSequence: String(upTo), ...joinsEntry(run.metadata) }),
  });
  if (!created.created) {
    throw new WaypointError('RUN_EXISTS', `Cannot fork '${sourceRunId}' into '${options.newRunId}': a run with that id already exists. Choose another newRunId.`, {
      runId: options.newRunId,
    });
  }
  const grant = await leaseFork(store, options.newRunId, workerId);
  const fence = { epoch: grant.epoch };
  try {
    const copied = await copyRows(
      store,
      created.run,
      loaded.steps.filter((s) => s.sequence <= upTo),
      loaded.steps,
      fence,
      integrity,
    );
    let { sequence } = copied;
    if (options.patchState) {
      sequence += 1;
      const patch = serialize(options.patchState, { runId: options.newRunId, what: 'patchState' });
      // With control flow the patch row has a path, `<step path>#patch`: the replay applies it just before that step.
      const at = patchPath === null ? null : `${patchPath}#patch`;
      const row = systemRow(options.newRunId, sequence, 'patch', patch, null, clock.now(), integrity, { identity: runIdentity(created.run), prev: copied.prev }, at);
      await store.appendStep({ step: row, run: { ...copied.cursor, status: 'running', resumeHint: null }, fence });
    }
    const hint = resumeHintFor(options.newRunId, 'paused', `(forked from '${sourceRunId}' at sequence ${upTo})`);
    await store.updateRun(options.newRunId, { status: 'paused', resumeHint: hint }, fence);
  } finally {
    await store.releaseLease(options.newRunId, workerId, grant.epoch);
  }
  return { sequence: upTo };
}

/** Takes the new run's lease for the copy; another worker holding it already means the id was taken meanwhile. */
async function leaseFork(store: CheckpointStore, runId: string, workerId: string): Promise<{ epoch: number }> {
  const grant = await store.acquireLease(runId, workerId, 60_000);
  if (!grant) throw new WaypointError('RUN_LOCKED', `Run '${runId}' was taken by another worker while being forked. Fork again with another newRunId.`, { runId });
  return grant;
}

/**
 * Copies the source's rows `kept` into the fork `run`, re-keyed and re-hashed (the fork has the source's
 * pipeline name and input, so the same identity; its rows chain anew). Returns the last sequence, link and cursor.
 */
async function copyRows(
  store: CheckpointStore,
  run: RunRecord,
  kept: readonly StepRecord[],
  all: readonly StepRecord[],
  fence: Fence,
  integrity: Integrity,
): Promise<{ sequence: number; prev: string; cursor: { cursorAgent: number; cursorStep: number } }> {
  const identity = runIdentity(run);
  let sequence = 0;
  let prev = '';
  let cursor = { cursorAgent: 0, cursorStep: 0 };
  for (const source of kept) {
    sequence += 1;
    const { sha256: _old, ...rest } = { ...source, runId: run.runId, sequence, checkpointId: `${source.checkpointId}:fork` };
    const copy: StepRecord = { ...rest, sha256: stepDigest(rest, integrity, { identity, prev }) };
    prev = linkOf(copy);
    const next = all.find((s) => s.sequence === source.sequence + 1);
    cursor = next && next.agentId !== SYSTEM_AGENT ? { cursorAgent: next.agentIndex, cursorStep: next.stepIndex } : cursor;
    await store.appendStep({ step: copy, run: { ...cursor, status: 'running', resumeHint: null }, fence });
  }
  return { sequence, prev, cursor };
}

/** Where a control-flow fork's patch applies: `patchBefore`, else `fromStep`'s path, else the first step recorded after the fork point. */
function patchPathOf(runId: string, steps: readonly StepRecord[], upTo: number, options: ForkOptions): string {
  if (options.patchBefore !== undefined) return options.patchBefore;
  const next = steps.find((s) => s.sequence > upTo && s.agentId !== SYSTEM_AGENT);
  if (next) return rowPath(next);
  throw new WaypointError(
    'FORK_PATCH_NO_STEP',
    `Run '${runId}' has control flow and no recorded step after sequence ${upTo}, so a state patch has no step to apply before. Pass patchBefore with the path of the step the patch is for (for a failed run, the failed step's path), or fork from an earlier point.`,
    { runId },
  );
}

function forkPoint(runId: string, steps: readonly StepRecord[], options: ForkOptions): number {
  const last = steps.length === 0 ? 0 : steps[steps.length - 1].sequence;
  // After retention the first kept row is a base snapshot: the checkpoints before it are only in the archive,
  // and a fork from one of them would copy no row at all and silently start over from the input.
  const oldest = steps[0]?.agentId === SYSTEM_AGENT && steps[0].stepName === 'base' ? steps[0].sequence : 0;
  if (options.fromStep !== undefined) {
    const matches = steps.filter(
      (s) => s.agentId !== SYSTEM_AGENT && (s.path === options.fromStep || `${s.agentId}/${s.stepName}` === options.fromStep || (!s.path && s.stepName === options.fromStep)),
    );
    if (matches.length !== 1) {
      throw new WaypointError(
        'NO_SUCH_STEP',
        `Run '${runId}' has ${matches.length === 0 ? 'no recorded step' : 'several recorded steps'} named '${options.fromStep}'${oldest > 0 ? ` among the steps after sequence ${oldest} (retention folded the ones before into a base snapshot)` : ''}. Use 'agentId/stepName' (or, under control flow, the step's path such as 'loop[2]/Validate/runTests') of a completed step, or fromSequence.`,
        { runId },
      );
    }
    return matches[0].sequence - 1;
  }
  const at = options.fromSequence ?? last;
  if (!Number.isInteger(at) || at < oldest || at > last) {
    const folded =
      oldest > 0
        ? `; sequences before ${oldest} were folded by retention into its base snapshot (they are in the archive only: waypoint.retention.restore(runId) puts them back), so ${oldest} is the oldest sequence a fork can start from`
        : '';
    throw new WaypointError(
      'NO_SUCH_CHECKPOINT',
      `Run '${runId}' has checkpoints ${oldest} to ${last} in the store; cannot fork from sequence ${String(options.fromSequence)}${folded}. Pass a fromSequence in that range.`,
      {
        runId,
      },
    );
  }
  return at;
}
