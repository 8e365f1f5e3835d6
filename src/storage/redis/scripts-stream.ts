/**
 * The Redis store's Lua script of the runs' output streams (issue 37). Registered with the others by
 * scripts.ts, whose conventions (server TIME, 'FENCED') and prelude helpers it shares.
 */
export const STREAM_SCRIPTS = {
  // KEYS: run, events. ARGV: epoch ('' = unfenced), then 6 arguments per event: kind, step, attempt,
  // data, status, detail, each '' when the event has none, else '1' + the value (codec.ts nullableArg).
  // The fence check, the offset (the stream's length) and the XADDs are one script, so a stale writer
  // adds nothing and two appenders of a run never take the same offsets. Entry id of offset n: '<n+1>-0'.
  // A run whose keys are set to expire (a finished run, finishedRunTtlSeconds) gets the same expiry on
  // its events. Returns the first offset, or 'FENCED' (stale epoch) / 'MISSING' (unknown run).
  waypointAppendEvents: {
    keys: 2,
    lua: `
local epoch = redis.call('HGET', KEYS[1], 'lease_epoch')
if not epoch then return 'MISSING' end
if ARGV[1] ~= '' and tonumber(epoch) ~= tonumber(ARGV[1]) then return 'FENCED' end
local first = redis.call('XLEN', KEYS[2])
local ms = ms_str(now_ms())
local names = { 'k', 's', 'a', 'd', 'st', 'dt' }
local n = first
for i = 2, #ARGV, 6 do
  n = n + 1
  local fields = { 't', ms }
  for j = 0, 5 do
    local v = ARGV[i + j]
    if v ~= '' then fields[#fields + 1] = names[j + 1]; fields[#fields + 1] = string.sub(v, 2) end
  end
  redis.call('XADD', KEYS[2], string.format('%.0f', n) .. '-0', unpack(fields))
end
local ttl = redis.call('PTTL', KEYS[1])
if ttl > 0 then redis.call('PEXPIRE', KEYS[2], ttl) end
return first`,
  },
};
