/**
 * The Redis store's Lua scripts off a run's hot path: the payload rewrite (re-encryption), the step-range
 * replace (retention, forks), the listings, deletion and the index sweep. Registered with the others by
 * scripts.ts, whose conventions (times, nullable arguments, 'FENCED') and prelude helpers they share.
 */
export const MAINTENANCE_SCRIPTS = {
  // KEYS: run, steps. ARGV: run_id, op_stem, then one compare-and-swap per 5 arguments: kind ('run' |
  // 'step' | 'op'), target (step: sequence, op: operation key, run: ''), field, from, to. Run and
  // operation fields are compared whole (as stored, encodeText); a step field (output, memory) is given
  // as its JSON text and found between the keys around it in the entry, short keys or the first format's
  // long ones (codec.ts STEP_FIELD_KEYS), then replaced in place without re-encoding the rest of the entry.
  // Only operations of this run are touched; nothing else (updated_at, indexes, lease) changes.
  // Returns { rewritten, skipped }.
  waypointRewritePayloads: {
    keys: 2,
    lua: `
local around = {
  output = { { '"o":', ',"m":' }, { '"output":', ',"memory":' } },
  memory = { { '"m":', ',"k":' }, { '"memory":', ',"idempotencyKey":' } },
}
local function swap(kind, target, field, from, to)
  if kind == 'run' then
    if redis.call('HGET', KEYS[1], field) ~= from then return false end
    redis.call('HSET', KEYS[1], field, to)
  elseif kind == 'step' then
    local entry = redis.call('HGET', KEYS[2], target)
    local keys = around[field]
    if not entry or not keys then return false end
    for _, pair in ipairs(keys) do
      local text = pair[1] .. from .. pair[2]
      local at, last = string.find(entry, text, 1, true)
      if at then
        redis.call('HSET', KEYS[2], target, string.sub(entry, 1, at - 1) .. pair[1] .. to .. pair[2] .. string.sub(entry, last + 1))
        return true
      end
    end
    return false
  else
    local key = ARGV[2] .. target
    local cur = redis.call('HMGET', key, 'run_id', field)
    if cur[1] ~= ARGV[1] or cur[2] ~= from then return false end
    redis.call('HSET', key, field, to)
  end
  return true
end
local exists = redis.call('EXISTS', KEYS[1]) == 1
local rewritten, skipped = 0, 0
for i = 3, #ARGV, 5 do
  if exists and swap(ARGV[i], ARGV[i + 1], ARGV[i + 2], ARGV[i + 3], ARGV[i + 4]) then
    rewritten = rewritten + 1
  else
    skipped = skipped + 1
  end
end
return { rewritten, skipped }`,
  },
  // KEYS: run, steps, runs index. ARGV: epoch ('' unfenced), from, to ('' to the end), only_if_before (''),
  // cursor_agent ('' leaves the run row), cursor_step, status_stem, pipeline_stem, then sequence, entry per
  // replacing row (ascending). Replaces the step range [from, to] by the rows (CheckpointStore.replaceSteps).
  // Returns 'FENCED' when fenced out, else 'OK' (an unknown run, or no row before only_if_before: no-op).
  waypointReplaceSteps: {
    keys: 3,
    lua: `
local cur = redis.call('HMGET', KEYS[1], 'lease_epoch', 'last_sequence', 'status', 'pipeline_name', 'run_id')
if ARGV[1] ~= '' and (not cur[1] or tonumber(cur[1]) ~= tonumber(ARGV[1])) then return 'FENCED' end
if not cur[5] then return 'OK' end
local last = tonumber(cur[2] or '0')
if ARGV[4] ~= '' then
  local before = tonumber(ARGV[4])
  local found = false
  for _, f in ipairs(redis.call('HKEYS', KEYS[2])) do
    if tonumber(f) < before then found = true break end
  end
  if not found then return 'OK' end
end
local from = tonumber(ARGV[2])
local to_end = ARGV[3] == ''
local to = last
if not to_end then to = math.min(tonumber(ARGV[3]), last) end
local i = math.max(from, 1)
while i <= to do
  local fields = {}
  for s = i, math.min(i + 999, to) do fields[#fields + 1] = tostring(s) end
  redis.call('HDEL', KEYS[2], unpack(fields))
  i = i + 1000
end
local top = nil
for k = 9, #ARGV, 2 do
  redis.call('HSET', KEYS[2], ARGV[k], ARGV[k + 1])
  top = tonumber(ARGV[k])
end
if ARGV[5] == '' then return 'OK' end
local new_last = last
if to_end then new_last = top or math.min(last, from - 1) end
local ms = ms_str(now_ms())
redis.call('HSET', KEYS[1], 'cursor_agent', ARGV[5], 'cursor_step', ARGV[6], 'last_sequence', ms_str(new_last), 'updated_at', ms)
reindex(KEYS[3], ARGV[7], ARGV[8], cur[5], cur[4], cur[3], cur[3], ms)
return 'OK'`,
  },
  // KEYS: run, steps. ARGV: from, to. The step entries (field, value, ...) in [from, min(to, last_sequence)].
  waypointListSteps: {
    keys: 2,
    readOnly: true,
    lua: `
local last = tonumber(redis.call('HGET', KEYS[1], 'last_sequence') or '0')
local from = math.max(tonumber(ARGV[1]), 1)
local to = math.min(tonumber(ARGV[2]), last)
local out = {}
steps_between(KEYS[2], from, to, out)
return out`,
  },
  // KEYS: ops. ARGV: op_stem. The run's operation hashes (each flat), in creation order.
  waypointListOperations: {
    keys: 1,
    readOnly: true,
    lua: `
local out = {}
for _, k in ipairs(redis.call('LRANGE', KEYS[1], 0, -1)) do
  local h = redis.call('HGETALL', ARGV[1] .. k)
  if #h > 0 then out[#out + 1] = h end
end
return out`,
  },
  // KEYS: run, steps, ops, runs_idx, events. ARGV: run_id, status_stem, pipeline_stem, op_stem, parent_stem, every status...
  // The status is removed from every status index: a run whose hash expired no longer says which it was.
  waypointDeleteRun: {
    keys: 5,
    lua: `
local pipeline = redis.call('HGET', KEYS[1], 'pipeline_name')
if pipeline then redis.call('ZREM', ARGV[3] .. pipeline, ARGV[1]) end
local parent = redis.call('HGET', KEYS[1], 'parent_run_id')
if parent then redis.call('ZREM', ARGV[5] .. parent, ARGV[1]) end
for i = 6, #ARGV do redis.call('ZREM', ARGV[2] .. ARGV[i], ARGV[1]) end
redis.call('ZREM', KEYS[4], ARGV[1])
for _, k in ipairs(redis.call('LRANGE', KEYS[3], 0, -1)) do redis.call('DEL', ARGV[4] .. k) end
redis.call('DEL', KEYS[1], KEYS[2], KEYS[3], KEYS[5])
return 'OK'`,
  },
  // KEYS: run, pipeline_idx. ARGV: run_id, pipeline_name ('' when not listing by pipeline), index keys...
  // Drops a stale entry found while listing, re-checked here so a run re-created under the same id keeps
  // its entries: a missing run leaves every index; an existing run found in another pipeline's index (its
  // id reused after its first run expired) leaves that index only. Returns 1 when something was dropped.
  waypointDropStale: {
    keys: 2,
    lua: `
if redis.call('EXISTS', KEYS[1]) == 1 then
  if ARGV[2] == '' or redis.call('HGET', KEYS[1], 'pipeline_name') == ARGV[2] then return 0 end
  redis.call('ZREM', KEYS[2], ARGV[1])
  return 1
end
redis.call('ZREM', KEYS[2], ARGV[1])
for i = 3, #ARGV do redis.call('ZREM', ARGV[i], ARGV[1]) end
return 1`,
  },
};
