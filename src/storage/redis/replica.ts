import type { Redis } from 'ioredis';
import type { OperationRecord, RunRecord, StepRecord } from '../../contract/checkpoint-store';
import { decodeStep, encodeStep, encodeText, pairs, toRunRecord } from './codec';
import type { RedisKeys } from './keys';
import { SCRIPT_PRELUDE } from './scripts';

/**
 * What another tier needs from the Redis store beyond the contract: a consistent read of a run's tail
 * (to copy it elsewhere) and an atomic, insert-if-absent import of a whole run (to bring back a run
 * that exists elsewhere but not here). Used by the tiered store's write-behind mode.
 */
const SCRIPTS = {
  // KEYS: run, steps. ARGV: from. { run hash (flat), step entries from..last_sequence (flat) } in one
  // snapshot, or nil when there is no run.
  waypointReadTail: {
    keys: 2,
    lua: `
local run = redis.call('HGETALL', KEYS[1])
if #run == 0 then return false end
local last = tonumber(redis.call('HGET', KEYS[1], 'last_sequence') or '0')
return { run, steps_between(KEYS[2], math.max(tonumber(ARGV[1]), 1), last, {}) }`,
  },
  // KEYS: run, steps, ops, runs_idx. ARGV: run_id, pipeline, status, updated_ms, status_stem,
  // pipeline_stem, op_stem, ttl_s, parent_stem, parent_run_id ('' for none), created_ms, n_run, n_steps,
  // n_ops, then n_run run hash values (field, value...),
  // n_steps step values (sequence, json...), and per operation: key, n_fields, field values.
  // Returns 0 (the run exists: nothing written) or 1. HSET per pair: no unpack() of large tables.
  waypointImportRun: {
    keys: 4,
    lua: `
if redis.call('EXISTS', KEYS[1]) == 1 then return 0 end
local i = 15
for j = i, i + tonumber(ARGV[12]) - 1, 2 do redis.call('HSET', KEYS[1], ARGV[j], ARGV[j + 1]) end
i = i + tonumber(ARGV[12])
redis.call('DEL', KEYS[2], KEYS[3])
for j = i, i + tonumber(ARGV[13]) - 1, 2 do redis.call('HSET', KEYS[2], ARGV[j], ARGV[j + 1]) end
i = i + tonumber(ARGV[13])
if ARGV[10] ~= '' then redis.call('ZADD', ARGV[9] .. ARGV[10], ARGV[11], ARGV[1]) end
for n = 1, tonumber(ARGV[14]) do
  local op_key = ARGV[7] .. ARGV[i]
  local count = tonumber(ARGV[i + 1])
  redis.call('DEL', op_key)
  for j = i + 2, i + 1 + count, 2 do redis.call('HSET', op_key, ARGV[j], ARGV[j + 1]) end
  redis.call('RPUSH', KEYS[3], ARGV[i])
  i = i + 2 + count
end
reindex(KEYS[4], ARGV[5], ARGV[6], ARGV[1], ARGV[2], false, ARGV[3], ARGV[4])
retain(KEYS[1], KEYS[2], KEYS[3], ARGV[7], tonumber(ARGV[8]), ARGV[3], ARGV[3])
return 1`,
  },
} as const;

export type ReplicaScripts = { [name in keyof typeof SCRIPTS]: (...keysThenArgs: (string | number)[]) => Promise<unknown> };

export function defineReplicaScripts(client: Redis): Redis & ReplicaScripts {
  for (const [name, def] of Object.entries(SCRIPTS)) client.defineCommand(name, { numberOfKeys: def.keys, lua: SCRIPT_PRELUDE + def.lua });
  return client as Redis & ReplicaScripts;
}

/** The run and its steps from `fromSequence` to its lastSequence, read in one snapshot. */
export async function readTail(client: Redis & ReplicaScripts, keys: RedisKeys, runId: string, fromSequence: number): Promise<{ run: RunRecord; steps: StepRecord[] } | null> {
  const reply = (await client.waypointReadTail(keys.run(runId), keys.steps(runId), fromSequence)) as [string[], string[]] | null;
  if (!reply) return null;
  const steps: StepRecord[] = [];
  for (let i = 0; i + 1 < reply[1].length; i += 2) steps.push(decodeStep(runId, reply[1][i], reply[1][i + 1]));
  return { run: toRunRecord(pairs(reply[0]))!, steps };
}

/**
 * Writes a run, its steps and its operations unless the run already exists (then nothing changes).
 * The lease is not imported (the run comes in free) and the epoch is raised by `epochJump`, so an
 * executor that still holds an epoch handed out before the run left this store is fenced out.
 */
export async function importRun(
  client: Redis & ReplicaScripts,
  keys: RedisKeys,
  ttlSeconds: number,
  run: RunRecord,
  steps: readonly StepRecord[],
  operations: readonly OperationRecord[],
  epochJump: number,
): Promise<boolean> {
  const runFields = runHashArgs(run, epochJump);
  const stepArgs = steps.flatMap((step) => [step.sequence, encodeStep(step)]);
  const opArgs = operations.flatMap(operationArgs);
  const { stems } = keys;
  const imported = await client.waypointImportRun(
    keys.run(run.runId),
    keys.steps(run.runId),
    keys.runOperations(run.runId),
    keys.runsIndex(),
    run.runId,
    run.pipelineName,
    run.status,
    run.updatedAt.getTime(),
    stems.status,
    stems.pipeline,
    stems.operation,
    ttlSeconds,
    stems.parent,
    run.parentRunId ?? '',
    run.createdAt.getTime(),
    runFields.length,
    stepArgs.length,
    operations.length,
    ...runFields,
    ...stepArgs,
    ...opArgs,
  );
  return imported === 1;
}

/** The run hash as field, value pairs (a null field left out): free of its lease, its epoch raised by `epochJump`. */
function runHashArgs(run: RunRecord, epochJump: number): (string | number)[] {
  return [
    ['run_id', run.runId],
    ['pipeline_name', run.pipelineName],
    ['pipeline_version', run.pipelineVersion],
    ['status', run.status],
    ['cursor_agent', run.cursorAgent],
    ['cursor_step', run.cursorStep],
    ['last_sequence', run.lastSequence],
    ['input', encodeText(run.input)],
    ['metadata', encodeText(run.metadata)],
    ['lease_epoch', run.leaseEpoch + epochJump],
    ['error', run.error === null ? null : encodeText(run.error)],
    ['resume_hint', run.resumeHint === null ? null : encodeText(run.resumeHint)],
    ['created_at', run.createdAt.getTime()],
    ['updated_at', run.updatedAt.getTime()],
    ['parent_run_id', run.parentRunId ?? null],
  ]
    .filter(([, value]) => value !== null)
    .flat() as (string | number)[];
}

/** One operation's arguments of the import script: its key, the count of its field values, then the field, value pairs. */
function operationArgs(op: OperationRecord): (string | number)[] {
  const fields = [
    ['operation_key', op.operationKey],
    ['run_id', op.runId],
    ['step_key', op.stepKey],
    ['name', op.name],
    ['state', op.state],
    ['result', op.result === null ? null : encodeText(op.result)],
    ['error', op.error === null ? null : encodeText(op.error)],
    ['attempts', op.attempts],
    ['created_at', op.createdAt.getTime()],
    ['updated_at', op.updatedAt.getTime()],
  ]
    .filter(([, value]) => value !== null)
    .flat() as (string | number)[];
  return [op.operationKey, fields.length, ...fields];
}
