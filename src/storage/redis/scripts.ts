import type { Redis } from 'ioredis';
import { MAINTENANCE_SCRIPTS } from './scripts-maintenance';
import { STREAM_SCRIPTS } from './scripts-stream';

/**
 * The Lua scripts of the Redis store. Every write that must be atomic or fenced is one script, so the
 * fence check and the write cannot be separated by another client's command. "Now" is the server's
 * TIME, so lease expiry does not depend on the workers' clocks agreeing (Redis >= 5 replicates a script's
 * effects, not the script, which is what allows TIME before a write).
 *
 * Conventions shared with the TypeScript side: times are epoch ms as decimal strings; a nullable
 * argument is '' (leave), '0' (clear) or '1' + text (set), see `nullableArg`; a rejected fenced write
 * returns the status string 'FENCED' (or 'SEQUENCE'), which the store turns into `LeaseLostError`.
 * Key stems (ARGV) come from keys.ts so key naming lives in one place.
 */
const PRELUDE = `
local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
local function ms_str(ms) return string.format('%.0f', ms) end
local function is_terminal(s) return s == 'completed' or s == 'failed' or s == 'cancelled' end
local function set_nullable(key, field, arg)
  if arg == '' then return end
  if arg == '0' then redis.call('HDEL', key, field) else redis.call('HSET', key, field, string.sub(arg, 2)) end
end
-- Appends (field, value) of the step entries from..to that exist to out. HMGET in chunks: unpack() of
-- thousands of arguments would overflow the Lua C stack.
local function steps_between(steps_key, from, to, out)
  local i = from
  while i <= to do
    local fields = {}
    local j = math.min(i + 999, to)
    for s = i, j do fields[#fields + 1] = tostring(s) end
    local values = redis.call('HMGET', steps_key, unpack(fields))
    for n = 1, #fields do
      if values[n] then out[#out + 1] = fields[n]; out[#out + 1] = values[n] end
    end
    i = j + 1
  end
  return out
end
-- Keeps the run's entries in the sorted-set indexes scored by updated_at.
local function reindex(runs_idx, status_stem, pipeline_stem, run_id, pipeline, old_status, new_status, ms)
  redis.call('ZADD', runs_idx, ms, run_id)
  if old_status and old_status ~= new_status then redis.call('ZREM', status_stem .. old_status, run_id) end
  redis.call('ZADD', status_stem .. new_status, ms, run_id)
  redis.call('ZADD', pipeline_stem .. pipeline, ms, run_id)
end
-- finishedRunTtlSeconds: a run entering (or written in) a terminal status gets all its keys expired
-- after ttl; a run leaving a terminal status (resumed after a failure) keeps them again.
local function retain(run_key, steps_key, ops_key, op_stem, ttl, old_status, new_status)
  if ttl <= 0 then return end
  local terminal = is_terminal(new_status)
  if not terminal and not is_terminal(old_status) then return end
  -- the run's events stream: keys.ts EVENTS_SUFFIX (a key derived here, like the operation keys below)
  local keys = { run_key, steps_key, ops_key, run_key .. ':events' }
  for _, k in ipairs(redis.call('LRANGE', ops_key, 0, -1)) do keys[#keys + 1] = op_stem .. k end
  for _, k in ipairs(keys) do
    if terminal then redis.call('EXPIRE', k, ttl) else redis.call('PERSIST', k) end
  end
end
`;

interface ScriptDef {
  keys: number;
  lua: string;
  readOnly?: boolean;
}

const SCRIPTS = {
  // KEYS: run, runs_idx. ARGV: run_id, pipeline_name, pipeline_version, input, metadata, status_stem,
  // pipeline_stem, parent_run_id ('' for a top-level run), parent_stem, every status... Returns
  // { created (0|1), run hash as flat array }. A top-level run's hash has no parent_run_id field at all.
  waypointCreateRun: {
    keys: 2,
    lua: `
if redis.call('EXISTS', KEYS[1]) == 1 then return { 0, redis.call('HGETALL', KEYS[1]) } end
local ms = ms_str(now_ms())
-- an earlier run under this id may have expired and left status entries behind
for i = 10, #ARGV do redis.call('ZREM', ARGV[6] .. ARGV[i], ARGV[1]) end
redis.call('HSET', KEYS[1], 'run_id', ARGV[1], 'pipeline_name', ARGV[2], 'pipeline_version', ARGV[3],
  'status', 'running', 'cursor_agent', '0', 'cursor_step', '0', 'last_sequence', '0', 'input', ARGV[4],
  'metadata', ARGV[5], 'lease_epoch', '0', 'created_at', ms, 'updated_at', ms)
if ARGV[8] ~= '' then
  redis.call('HSET', KEYS[1], 'parent_run_id', ARGV[8])
  redis.call('ZADD', ARGV[9] .. ARGV[8], ms, ARGV[1])
end
reindex(KEYS[2], ARGV[6], ARGV[7], ARGV[1], ARGV[2], false, 'running', ms)
return { 1, redis.call('HGETALL', KEYS[1]) }`,
  },
  // KEYS: run. ARGV: owner, ttl_ms, dead owner ('' for none). Returns { epoch, expires_ms } or nil when another owner holds it.
  waypointAcquireLease: {
    keys: 1,
    lua: `
local cur = redis.call('HMGET', KEYS[1], 'run_id', 'lease_owner', 'lease_expires_at')
if not cur[1] then return false end
local now = now_ms()
local dead = ARGV[3] ~= '' and cur[2] == ARGV[3]
if cur[2] and cur[2] ~= ARGV[1] and not dead and cur[3] and tonumber(cur[3]) > now then return false end
local epoch = redis.call('HINCRBY', KEYS[1], 'lease_epoch', 1)
local expires = ms_str(now + tonumber(ARGV[2]))
redis.call('HSET', KEYS[1], 'lease_owner', ARGV[1], 'lease_expires_at', expires)
return { epoch, expires }`,
  },
  // KEYS: run. ARGV: owner, epoch, ttl_ms ('' frees the lease; the epoch stays, so it is never reused).
  // Returns 1 when done, 0 when the lease is no longer ours.
  waypointSetLeaseExpiry: {
    keys: 1,
    lua: `
local cur = redis.call('HMGET', KEYS[1], 'lease_epoch', 'lease_owner')
if not cur[1] or tonumber(cur[1]) ~= tonumber(ARGV[2]) or cur[2] ~= ARGV[1] then return 0 end
if ARGV[3] == '' then
  redis.call('HDEL', KEYS[1], 'lease_owner', 'lease_expires_at')
else
  redis.call('HSET', KEYS[1], 'lease_expires_at', ms_str(now_ms() + tonumber(ARGV[3])))
end
return 1`,
  },
  // KEYS: run, steps, ops, runs_idx. ARGV: epoch, sequence, step_json, cursor_agent, cursor_step, status,
  // resume_hint (nullable), status_stem, pipeline_stem, op_stem, ttl_s. Returns 'OK' | 'FENCED' | 'SEQUENCE'.
  // O(1) whatever the run's length: one entry added, a few fixed-size fields of the run hash set. The
  // indexes (scored by updated_at) are only written when their score or the status changes: a step in
  // the same millisecond as the previous write of the run leaves them as they are, exactly right.
  waypointAppendStep: {
    keys: 4,
    lua: `
local cur = redis.call('HMGET', KEYS[1], 'lease_epoch', 'last_sequence', 'status', 'pipeline_name', 'run_id', 'updated_at')
if not cur[1] or tonumber(cur[1]) ~= tonumber(ARGV[1]) then return 'FENCED' end
if tonumber(cur[2]) + 1 ~= tonumber(ARGV[2]) then return 'SEQUENCE' end
redis.call('HSET', KEYS[2], ARGV[2], ARGV[3])
local ms = ms_str(now_ms())
redis.call('HSET', KEYS[1], 'cursor_agent', ARGV[4], 'cursor_step', ARGV[5], 'status', ARGV[6],
  'last_sequence', ARGV[2], 'updated_at', ms)
if ARGV[7] ~= '' then set_nullable(KEYS[1], 'resume_hint', ARGV[7]) end
if ms ~= cur[6] or ARGV[6] ~= cur[3] then reindex(KEYS[4], ARGV[8], ARGV[9], cur[5], cur[4], cur[3], ARGV[6], ms) end
retain(KEYS[1], KEYS[2], KEYS[3], ARGV[10], tonumber(ARGV[11]), cur[3], ARGV[6])
return 'OK'`,
  },
  // KEYS: run, steps, ops, runs_idx. ARGV: epoch, cursor_agent, cursor_step, status, resume_hint (nullable),
  // status_stem, pipeline_stem, op_stem, ttl_s, then (sequence, step_json) pairs in ascending order.
  // Several consecutive rows of one run (CheckpointStore.appendRun; 'async' durability's rows in flight) in
  // one call, all or none: one fence check and every sequence checked before anything is written, then the
  // rows in one HSET and the run hash and indexes once, with the last row's cursor and status. Returns
  // 'OK' | 'FENCED' | 'SEQUENCE'.
  waypointAppendSteps: {
    keys: 4,
    lua: `
local cur = redis.call('HMGET', KEYS[1], 'lease_epoch', 'last_sequence', 'status', 'pipeline_name', 'run_id', 'updated_at')
if not cur[1] or tonumber(cur[1]) ~= tonumber(ARGV[1]) then return 'FENCED' end
if #ARGV < 11 then return 'SEQUENCE' end
local last = tonumber(cur[2])
for i = 10, #ARGV, 2 do
  last = last + 1
  if tonumber(ARGV[i]) ~= last then return 'SEQUENCE' end
end
-- HSET in chunks of 200 rows: unpack() of thousands of arguments would overflow the Lua C stack
local i = 10
while i <= #ARGV do
  local j = math.min(i + 399, #ARGV)
  redis.call('HSET', KEYS[2], unpack(ARGV, i, j))
  i = j + 1
end
local ms = ms_str(now_ms())
redis.call('HSET', KEYS[1], 'cursor_agent', ARGV[2], 'cursor_step', ARGV[3], 'status', ARGV[4],
  'last_sequence', ARGV[#ARGV - 1], 'updated_at', ms)
if ARGV[5] ~= '' then set_nullable(KEYS[1], 'resume_hint', ARGV[5]) end
if ms ~= cur[6] or ARGV[4] ~= cur[3] then reindex(KEYS[4], ARGV[6], ARGV[7], cur[5], cur[4], cur[3], ARGV[4], ms) end
retain(KEYS[1], KEYS[2], KEYS[3], ARGV[8], tonumber(ARGV[9]), cur[3], ARGV[4])
return 'OK'`,
  },
  // KEYS: run, steps, ops, runs_idx. ARGV: fenced (0|1), epoch, status, pipeline_version, cursor_agent,
  // cursor_step ('' = unchanged for these four), error (nullable), resume_hint (nullable), status_stem,
  // pipeline_stem, op_stem, ttl_s. Returns 'OK' | 'FENCED' | 'MISSING' (unfenced update of no run: no-op).
  waypointUpdateRun: {
    keys: 4,
    lua: `
local cur = redis.call('HMGET', KEYS[1], 'lease_epoch', 'status', 'pipeline_name', 'run_id')
if ARGV[1] == '1' and (not cur[1] or tonumber(cur[1]) ~= tonumber(ARGV[2])) then return 'FENCED' end
if not cur[4] then return 'MISSING' end
local ms = ms_str(now_ms())
local status = cur[2]
if ARGV[3] ~= '' then status = ARGV[3] end
redis.call('HSET', KEYS[1], 'status', status, 'updated_at', ms)
if ARGV[4] ~= '' then redis.call('HSET', KEYS[1], 'pipeline_version', ARGV[4]) end
if ARGV[5] ~= '' then redis.call('HSET', KEYS[1], 'cursor_agent', ARGV[5]) end
if ARGV[6] ~= '' then redis.call('HSET', KEYS[1], 'cursor_step', ARGV[6]) end
set_nullable(KEYS[1], 'error', ARGV[7])
set_nullable(KEYS[1], 'resume_hint', ARGV[8])
reindex(KEYS[4], ARGV[9], ARGV[10], cur[4], cur[3], cur[2], status, ms)
retain(KEYS[1], KEYS[2], KEYS[3], ARGV[11], tonumber(ARGV[12]), cur[2], status)
return 'OK'`,
  },
  // KEYS: run, steps, ops, runs_idx. ARGV: resume_hint, status_stem, pipeline_stem, op_stem, ttl_s.
  // Cancels a non-terminal run and fences out its executor in the same write (lease cleared, epoch + 1).
  // Returns the run hash (flat) afterwards, or nil when unknown.
  waypointCancelRun: {
    keys: 4,
    lua: `
local cur = redis.call('HMGET', KEYS[1], 'run_id', 'status', 'pipeline_name')
if not cur[1] then return false end
-- a failed run can still be cancelled (so nobody resumes it); completed and cancelled ones cannot
if cur[2] ~= 'completed' and cur[2] ~= 'cancelled' then
  local ms = ms_str(now_ms())
  redis.call('HINCRBY', KEYS[1], 'lease_epoch', 1)
  redis.call('HDEL', KEYS[1], 'lease_owner', 'lease_expires_at')
  redis.call('HSET', KEYS[1], 'status', 'cancelled', 'resume_hint', ARGV[1], 'updated_at', ms)
  reindex(KEYS[4], ARGV[2], ARGV[3], cur[1], cur[3], cur[2], 'cancelled', ms)
  retain(KEYS[1], KEYS[2], KEYS[3], ARGV[4], tonumber(ARGV[5]), cur[2], 'cancelled')
end
return redis.call('HGETALL', KEYS[1])`,
  },
  // KEYS: run, op, steps, ops. ARGV: epoch, op_stem, ttl_s, operation_key, run_id, step_key, name (the
  // leading arguments of waypointWriteOperation).
  // Returns 'FENCED' or the operation hash (flat) after the call.
  waypointBeginOperation: {
    keys: 4,
    lua: `
local cur = redis.call('HMGET', KEYS[1], 'lease_epoch', 'status')
if not cur[1] or tonumber(cur[1]) ~= tonumber(ARGV[1]) then return 'FENCED' end
local state = redis.call('HGET', KEYS[2], 'state')
if state == 'committed' then return redis.call('HGETALL', KEYS[2]) end
local ms = ms_str(now_ms())
if state then
  redis.call('HSET', KEYS[2], 'state', 'started', 'updated_at', ms)
  redis.call('HINCRBY', KEYS[2], 'attempts', 1)
else
  redis.call('HSET', KEYS[2], 'operation_key', ARGV[4], 'run_id', ARGV[5], 'step_key', ARGV[6], 'name', ARGV[7],
    'state', 'started', 'attempts', '1', 'created_at', ms, 'updated_at', ms)
  redis.call('RPUSH', KEYS[4], ARGV[4])
  -- a record added to an already finished run must expire with it
  if is_terminal(cur[2]) then retain(KEYS[1], KEYS[3], KEYS[4], ARGV[2], tonumber(ARGV[3]), cur[2], cur[2]) end
end
return redis.call('HGETALL', KEYS[2])`,
  },
  // KEYS: run, op, steps, ops. ARGV: epoch ('' unfenced: insert-if-absent), op_stem, ttl_s, operation_key,
  // run_id, step_key, name, state, result (nullable), error (nullable), attempts. CheckpointStore.writeOperation:
  // fenced, a committed record is left as it is. Returns the operation hash (flat), or 'FENCED'.
  waypointWriteOperation: {
    keys: 4,
    lua: `
local cur = redis.call('HMGET', KEYS[1], 'lease_epoch', 'status')
if ARGV[1] ~= '' and (not cur[1] or tonumber(cur[1]) ~= tonumber(ARGV[1])) then return 'FENCED' end
local state = redis.call('HGET', KEYS[2], 'state')
if state and (ARGV[1] == '' or state == 'committed') then return redis.call('HGETALL', KEYS[2]) end
local ms = ms_str(now_ms())
redis.call('HSET', KEYS[2], 'operation_key', ARGV[4], 'run_id', ARGV[5], 'step_key', ARGV[6], 'name', ARGV[7],
  'state', ARGV[8], 'attempts', ARGV[11], 'updated_at', ms)
set_nullable(KEYS[2], 'result', ARGV[9])
set_nullable(KEYS[2], 'error', ARGV[10])
if not state then
  redis.call('HSET', KEYS[2], 'created_at', ms)
  redis.call('RPUSH', KEYS[4], ARGV[4])
  -- a record added to an already finished run must expire with it
  if is_terminal(cur[2]) then retain(KEYS[1], KEYS[3], KEYS[4], ARGV[2], tonumber(ARGV[3]), cur[2], cur[2]) end
end
return redis.call('HGETALL', KEYS[2])`,
  },
  // KEYS: run, op. ARGV: epoch, state ('committed'|'failed'), payload (result or error text).
  // HSET keeps a key's TTL, so a finished run's operation still expires with it. Returns 'OK' | 'FENCED'.
  waypointFinishOperation: {
    keys: 2,
    lua: `
local epoch = redis.call('HGET', KEYS[1], 'lease_epoch')
if not epoch or tonumber(epoch) ~= tonumber(ARGV[1]) then return 'FENCED' end
local state = redis.call('HGET', KEYS[2], 'state')
if not state or state == 'committed' then return 'OK' end
local ms = ms_str(now_ms())
if ARGV[2] == 'committed' then
  redis.call('HSET', KEYS[2], 'state', 'committed', 'result', ARGV[3], 'updated_at', ms)
  redis.call('HDEL', KEYS[2], 'error')
else
  redis.call('HSET', KEYS[2], 'state', 'failed', 'error', ARGV[3], 'updated_at', ms)
end
return 'OK'`,
  },
  ...MAINTENANCE_SCRIPTS,
  ...STREAM_SCRIPTS,
} satisfies Record<string, ScriptDef>;

type Arg = string | number;
export type ScriptName = keyof typeof SCRIPTS;
/** The scripts as methods of the client (ioredis defineCommand: keys first, then args). */
export type ScriptCommands = { [name in keyof typeof SCRIPTS]: (...keysThenArgs: Arg[]) => Promise<unknown> };
/** The same scripts queued on a pipeline (results come from `exec()`). */
export type PipelineScripts = { [name in keyof typeof SCRIPTS]: (...keysThenArgs: Arg[]) => unknown };

/** The full text (prelude included) and key count of a script, for callers that send it themselves. */
export function scriptSource(name: ScriptName): { lua: string; keys: number } {
  const def: ScriptDef = SCRIPTS[name];
  return { lua: PRELUDE + def.lua, keys: def.keys };
}

/** Lua helpers every script may use; exported for the store's replica scripts (replica.ts). */
export const SCRIPT_PRELUDE = PRELUDE;

/**
 * Registers the scripts on a client (ioredis sends EVALSHA and falls back to EVAL once per script after a
 * server restart or SCRIPT FLUSH). Safe to call on a client the caller owns: names are `waypoint*`.
 */
export function defineScripts<C extends Redis>(client: C): C & ScriptCommands {
  for (const [name, def] of Object.entries(SCRIPTS) as [string, ScriptDef][]) {
    client.defineCommand(name, { numberOfKeys: def.keys, lua: PRELUDE + def.lua, readOnly: def.readOnly });
  }
  return client as C & ScriptCommands;
}
