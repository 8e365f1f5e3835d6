import type { CheckpointStore, LoadedRun } from '../contract/checkpoint-store';
import { RunNotFoundError, WaypointError } from '../contract/errors';
import { checkpointAt, checkpointsOf, restoreRun, type PipelineCheckpoint } from '../core/history/checkpoint-manager';
import type { PipelinePlan } from '../core/plan/plan-reader';
import { SYSTEM_AGENT, type Integrity } from '../core/history/row-integrity';
import { rowsNeedThePipeline } from '../core/history/flow-base';
import { joinsOf } from '../core/flow/join-rows';
import { checkRunId } from '../core/run/run-id';
import type { ChildRuns } from './child-runs';

/**
 * The checkpoint read model behind `waypoint.checkpoint()` and `waypoint.checkpoints()`: a run's state at
 * each recorded sequence, from its rows, and for a control-flow run whose pipeline is registered, replayed
 * through that pipeline. A run recorded with its joins (core/flow/join-rows.ts) folds exactly without its
 * pipeline; one of an earlier release is read through its pipeline or refused (STATE_NEEDS_PIPELINE).
 */
export class CheckpointReader {
  constructor(
    private readonly store: CheckpointStore,
    private readonly integrity: Integrity,
    private readonly planNamed: (name: string) => PipelinePlan | undefined,
    private readonly childRuns: ChildRuns,
  ) {}

  /** The checkpoint read model at `sequence` (default: the latest). */
  async checkpoint(runId: string, sequence?: number): Promise<PipelineCheckpoint> {
    const loaded = await this.store.loadRun(checkRunId(runId));
    if (!loaded) throw new RunNotFoundError(runId);
    const at = sequence ?? loaded.run.lastSequence;
    // After retention the oldest kept row is a base snapshot: earlier checkpoints live in the archive only.
    const oldest = loaded.steps[0]?.agentId === SYSTEM_AGENT && loaded.steps[0].stepName === 'base' ? loaded.steps[0].sequence : 0;
    if (!Number.isInteger(at) || at < oldest || at > loaded.run.lastSequence) {
      throw new WaypointError(
        'NO_SUCH_CHECKPOINT',
        `Run '${runId}' has checkpoints ${oldest} to ${loaded.run.lastSequence} in the store; sequence ${String(sequence)} is not among them${oldest > 0 ? ' (older ones were folded by retention and are in the archive: waypoint.retention.restore(runId) puts them back)' : ''}. Pass a sequence in that range, or none for the latest.`,
        { runId },
      );
    }
    const checkpoint = checkpointAt(loaded.run, loaded.steps, at, this.integrity);
    const replayed = await this.flowState(loaded, at);
    return replayed ? { ...checkpoint, shared_context: replayed } : checkpoint;
  }

  /**
   * The state of a control-flow run at `sequence`, replayed through its registered pipeline (a run of
   * release 0.1 has no join rows, so only a replay gives its joins and `into`s); null for a straight line
   * or an unregistered pipeline, whose folded rows are the state (refused for a control-flow run of 0.1).
   */
  private async flowState(loaded: LoadedRun, sequence: number): Promise<Record<string, unknown> | null> {
    const plan = this.planNamed(loaded.run.pipelineName);
    if (!plan) assertFoldable(loaded);
    if (!plan || plan.linear || plan.version !== loaded.run.pipelineVersion) return null;
    const kept = { run: { ...loaded.run, lastSequence: sequence }, steps: loaded.steps.filter((row) => row.sequence <= sequence) };
    const restored = await restoreRun(plan, kept, this.integrity, { replay: true, childState: (p, id, c) => this.childRuns.childState(p, id, c) });
    return { ...restored.state };
  }

  /**
   * Every checkpoint of a run, oldest first: sequence 0 (the input state, nothing completed) and then one
   * per recorded step. After retention folded the start, the first is the base snapshot.
   */
  async checkpoints(runId: string): Promise<PipelineCheckpoint[]> {
    const loaded = await this.store.loadRun(checkRunId(runId));
    if (!loaded) throw new RunNotFoundError(runId);
    const all = checkpointsOf(loaded.run, loaded.steps, this.integrity);
    const plan = this.planNamed(loaded.run.pipelineName);
    if (!plan) assertFoldable(loaded);
    if (!plan || plan.linear) return all;
    for (const checkpoint of all) checkpoint.shared_context = (await this.flowState(loaded, checkpoint.checkpoint_sequence)) ?? checkpoint.shared_context;
    return all;
  }
}

/**
 * Refuses to fold a control-flow run of an earlier release without its pipeline: its rows do not hold what
 * its constructs joined, so the fold would be a state the run never had, with nothing saying so.
 */
function assertFoldable(loaded: LoadedRun): void {
  if (joinsOf(loaded.run.metadata) !== null || !rowsNeedThePipeline(loaded.steps)) return;
  const { runId, pipelineName } = loaded.run;
  throw new WaypointError(
    'STATE_NEEDS_PIPELINE',
    `Run '${runId}' is a control-flow run recorded by an earlier release, whose rows do not hold what its constructs joined (a forEach's into, a parallel's join, reducer merges), so its state cannot be read from the rows alone. Register pipeline '${pipelineName}' with this Waypoint (Waypoint.create({ pipelines: [...] })) to read it.`,
    { runId },
  );
}
