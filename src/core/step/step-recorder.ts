import type { CheckpointStore, StepRecord } from '../../contract/checkpoint-store';
import type { Agent } from '../../contract/agent';
import type { Clock } from '../../contract/clock';
import type { AttemptResult, LiveInput } from '../run/execution';
import { stepIdempotencyKey } from './idempotency-guard';
import type { StepPlan } from '../plan/plan-reader';
import { buildStepRecord, systemRow } from '../history/row-integrity';
import { serialize, serializeCopy } from '../state/serializer';
import { assertSecretsProtected, validateUpdate } from '../state/state-schema';
import { assertDeclared } from '../plan/strict-state';
import type { Telemetry } from '../../contract/telemetry';

/**
 * What a finished attempt produced, checked and serialized, before anything is written: the output's
 * text and its decoded private copy (what is merged into the state), the agent's memory text (null when
 * unchanged since the agent's previous row).
 */
export interface PreparedStep {
  step: StepPlan;
  /** The step's path in the run (`agentId/stepName` on a straight line). */
  path: string;
  attempt: AttemptResult;
  output: string;
  memory: string | null;
  update: Record<string, unknown>;
}

/**
 * How a finished attempt becomes a row: check and serialize a step's output and its agent's memory,
 * validate the update, build the sealed row, and report it once committed. The interpreter
 * (flow/flow-steps.ts) appends the row through its append queue, in the step's transaction when a
 * transactional side effect opened one, and merges the update into the state frame.
 */
export class StepRecorder {
  constructor(
    private readonly store: CheckpointStore,
    private readonly clock: Clock,
    private readonly telemetry: Telemetry,
    private readonly input: LiveInput,
  ) {}

  /**
   * Checks what the attempt produced: a `@Secret` property without encryption, an unserializable value,
   * under strictState a property its state class does not declare, an update its state class rejects, each throws its typed error before anything is recorded.
   * `lastMemory` is the agent's memory as last recorded.
   */
  prepare(step: StepPlan, path: string, attempt: AttemptResult, agent: Agent, lastMemory: string | undefined): PreparedStep {
    const { runId, plan } = this.input;
    assertSecretsProtected(plan.secrets, this.input.encrypted, attempt.output, { runId, step: path, what: 'output' });
    // Merge the decoded copy, not the object the step returned: the next step sees exactly what a resumed
    // run would rebuild from storage, and the step cannot alias the shared state.
    const { text: output, copy: update } = serializeCopy<Record<string, unknown>>(attempt.output, { runId, step: path, what: 'output' });
    const memoryText = serialize(agent.snapshot(), { runId, step: path, what: `memory of agent '${step.agentId}'` });
    if (this.input.strict !== null) assertDeclared(plan, this.input.strict, update, { runId, step: path, what: 'output' });
    if (this.input.validateEveryStep) validateUpdate(plan.state, update, { runId, step: path, phase: 'produced' });
    return { step, path, attempt, output, memory: memoryText === lastMemory ? null : memoryText, update };
  }

  /** The step's sealed row at `sequence`, chained to the row whose link is `prev`. */
  record(prepared: PreparedStep, sequence: number, prev: string): StepRecord {
    const { runId } = this.input;
    const { step, path, attempt } = prepared;
    return buildStepRecord(
      {
        runId,
        sequence,
        step,
        output: prepared.output,
        memory: prepared.memory,
        idempotencyKey: stepIdempotencyKey(runId, step.agentId, path === step.key ? step.name : path),
        sideEffectsCommitted: attempt.committed.length > 0,
        startedAt: attempt.startedAt,
        completedAt: this.clock.now(),
        attempt: attempt.attempt,
      },
      this.input.integrity,
      { identity: this.input.restored.chain.identity, prev },
      // A row keeps its own path only where it is not `agentId/stepName` (a straight line's rows, and rows of earlier releases).
      path === `${step.agentId}/${step.name}` ? null : path,
    );
  }

  /** The row of a step its `when` condition skipped (no output, no attempt), at `sequence` chained to `prev`. */
  skipRow(step: StepPlan, path: string, at: Date, sequence: number, prev: string): StepRecord {
    const { runId } = this.input;
    return buildStepRecord(
      {
        runId,
        sequence,
        step,
        output: '{}',
        memory: null,
        idempotencyKey: stepIdempotencyKey(runId, step.agentId, path === step.key ? step.name : path),
        sideEffectsCommitted: false,
        startedAt: at,
        completedAt: at,
        attempt: 0,
        status: 'skipped',
      },
      this.input.integrity,
      { identity: this.input.restored.chain.identity, prev },
      path === `${step.agentId}/${step.name}` ? null : path,
    );
  }

  /** A row of the runtime's own at `path` (a decision, a construct's join, a step's merge), at `sequence` chained to `prev`. */
  systemRow(kind: 'decision' | 'join' | 'merge', path: string, output: string, sequence: number, prev: string): StepRecord {
    const { runId, integrity, restored } = this.input;
    return systemRow(runId, sequence, kind, output, null, this.clock.now(), integrity, { identity: restored.chain.identity, prev }, path);
  }

  /** Tells telemetry (and the debug log) that the row of a prepared step is committed. */
  completed(prepared: PreparedStep, record: StepRecord, checkpointMs: number): void {
    const { runId, plan, logger } = this.input;
    const bytes = prepared.output.length + (prepared.memory?.length ?? 0);
    this.telemetry.stepCompleted({
      runId,
      pipeline: plan.name,
      step: prepared.path,
      sequence: record.sequence,
      backend: this.store.backend,
      attempt: prepared.attempt.attempt,
      durationMs: record.completedAt.getTime() - record.startedAt.getTime(),
      checkpointMs,
      bytes,
    });
    if (logger.isLevelEnabled?.('debug') !== false)
      logger.debug('checkpoint written', { agent: prepared.step.agentId, step: prepared.path, sequence: record.sequence, attempt: prepared.attempt.attempt, bytes });
  }
}
