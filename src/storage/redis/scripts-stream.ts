/**
 * The Redis store's Lua script of the runs' output streams (issue 37). Registered with the others by
 * scripts.ts, whose conventions (server TIME, 'FENCED') and prelude helpers it shares.
 */
export const STREAM_SCRIPTS = {
  // KEYS: run, events. ARGV: epoch ('' = unfenced), the number of events, the batch body (stream-rows.ts
  // encodeStreamBatch). One entry per append: id '<end>-0', where end is the offset after its last event
  // (so "an event at or after offset n" is still "an entry after id n-0"), fields t (server time), n (the
  // count) and b (the body). Entries written per event before (fields k, s, a, d, st, dt) have id
  // '<offset + 1>-0': the same rule with a count of 1. The next offset is the last entry's id. The fence
  // check, the offset and the XADD are one script, so a stale writer adds nothing and two appenders of a
  // run never take the same offsets. A run whose keys are set to expire (a finished run,
  // finishedRunTtlSeconds) gets the same expiry on its events. Returns the first offset, or 'FENCED'
  // (stale epoch) / 'MISSING' (unknown run).
  waypointAppendEvents: {
    keys: 2,
    lua: `
local epoch = redis.call('HGET', KEYS[1], 'lease_epoch')
if not epoch then return 'MISSING' end
if ARGV[1] ~= '' and tonumber(epoch) ~= tonumber(ARGV[1]) then return 'FENCED' end
local last = redis.call('XREVRANGE', KEYS[2], '+', '-', 'COUNT', 1)
local first = 0
if last[1] then first = tonumber(string.match(last[1][1], '^(%d+)')) end
local n = tonumber(ARGV[2])
redis.call('XADD', KEYS[2], string.format('%.0f', first + n) .. '-0', 't', ms_str(now_ms()), 'n', ARGV[2], 'b', ARGV[3])
local ttl = redis.call('PTTL', KEYS[1])
if ttl > 0 then redis.call('PEXPIRE', KEYS[2], ttl) end
return first`,
  },
};
