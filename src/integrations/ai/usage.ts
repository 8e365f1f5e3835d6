import { deserialize } from '../../core/state/value-decoder';
import type { OperationRecord } from '../../contract/checkpoint-store';

// This file reads the operations log only: it must not import `ai`, so the CLI and the timeline page can
// show token usage without loading the SDK.

/** Name of the operations `durableModel` records (`durable()` prefixes its names with `durable:`); `:<name>` follows with a `name` option. */
export const MODEL_OPERATION = 'durable:ai:model';
/** Name prefix of the operations `durableTools` records: `durable:ai:tool:<toolName>:<toolCallId>`. */
export const TOOL_OPERATION_PREFIX = 'durable:ai:tool:';

/** Model calls, their tokens and tool calls. */
export interface AiUsage {
  modelCalls: number;
  inputTokens: number;
  outputTokens: number;
  toolCalls: number;
}

/** What the AI calls of one step recorded, and how much of it a later attempt reused instead of repeating. */
export interface StepAiUsage extends AiUsage {
  /** `agentId/stepName`. */
  step: string;
  /**
   * Recorded before the attempt that completed the step started (in an attempt that failed, or in a
   * process that was killed), so that attempt got them from the log: model calls and tokens not paid
   * for again, tool calls not run again. Zero for a step that is not completed yet.
   */
  reused: AiUsage;
}

/** The token counts of a recorded model call (a provider that reports none counts 0). */
export function tokensOfRecord(recorded: unknown): { input: number; output: number } {
  const usage = usageOf(recorded);
  return { input: usage?.inputTokens?.total ?? 0, output: usage?.outputTokens?.total ?? 0 };
}

interface UsageShape {
  inputTokens?: { total?: number };
  outputTokens?: { total?: number };
}

function usageOf(recorded: unknown): UsageShape | undefined {
  if (typeof recorded !== 'object' || recorded === null) return undefined;
  const r = recorded as { kind?: string; result?: { usage?: UsageShape }; parts?: { type?: string; usage?: UsageShape }[] };
  if (r.kind === 'generate') return r.result?.usage;
  if (r.kind === 'stream') return r.parts?.find((p) => p.type === 'finish')?.usage;
  return undefined;
}

/**
 * Token usage per step from a run's operations log (`store.listOperations(runId)`), in first-seen order.
 * `completedAttemptStartedAt` maps a step key to the start of the attempt that completed it (its row's
 * `startedAt`): committed calls recorded before that instant count as reused.
 *
 * @example
 * const usage = aiUsageByStep(await store.listOperations(runId), new Map(rows.map((r) => [`${r.agentId}/${r.stepName}`, r.startedAt])));
 */
export function aiUsageByStep(operations: readonly OperationRecord[], completedAttemptStartedAt: ReadonlyMap<string, Date> = new Map()): StepAiUsage[] {
  const byStep = new Map<string, StepAiUsage>();
  for (const op of operations) {
    const model = op.name === MODEL_OPERATION || op.name.startsWith(`${MODEL_OPERATION}:`);
    if (op.state !== 'committed' || (!model && !op.name.startsWith(TOOL_OPERATION_PREFIX))) continue;
    let entry = byStep.get(op.stepKey);
    if (!entry) byStep.set(op.stepKey, (entry = { step: op.stepKey, ...zero(), reused: zero() }));
    const started = completedAttemptStartedAt.get(op.stepKey);
    const targets = started !== undefined && op.updatedAt < started ? [entry, entry.reused] : [entry];
    const tokens = model ? tokensOfRecord(responseOf(op.result)) : { input: 0, output: 0 };
    for (const t of targets) {
      if (model) t.modelCalls += 1;
      else t.toolCalls += 1;
      t.inputTokens += tokens.input;
      t.outputTokens += tokens.output;
    }
  }
  return [...byStep.values()];
}

/** Sum of several usages. */
export function addUsage(...usages: AiUsage[]): AiUsage {
  const total = zero();
  for (const u of usages) {
    total.modelCalls += u.modelCalls;
    total.inputTokens += u.inputTokens;
    total.outputTokens += u.outputTokens;
    total.toolCalls += u.toolCalls;
  }
  return total;
}

function zero(): AiUsage {
  return { modelCalls: 0, inputTokens: 0, outputTokens: 0, toolCalls: 0 };
}

/** The response inside a `durable()` record (`{ requestHash, response }`), or undefined if unreadable. */
function responseOf(result: string | null): unknown {
  if (result === null) return undefined;
  try {
    return deserialize<{ response?: unknown } | null>(result)?.response;
  } catch {
    return undefined; // an unreadable record counts as a call without known tokens
  }
}
