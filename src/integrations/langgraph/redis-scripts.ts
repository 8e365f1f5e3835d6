import type { Redis } from 'ioredis';

/**
 * The Lua scripts of the LangGraph saver on Redis: each write that must be atomic is one script. Key
 * and member naming follows redis-keys.ts; members join their parts with NUL ('\0' in Lua).
 */
const SCRIPTS = {
  // KEYS: checkpoints, blobs, by-ns, by-id, all-checkpoints, threads.
  // ARGV: field (ns NUL id), record, by-id member, global member, thread id, n inherited, the n inherited
  // addresses, then (address, blob record) pairs. Returns 'MISSING' (nothing written) when an inherited
  // blob no longer exists, else 'OK'.
  waypointLgPut: {
    keys: 6,
    lua: `
local n = tonumber(ARGV[6])
for i = 7, 6 + n do
  if redis.call('HEXISTS', KEYS[2], ARGV[i]) == 0 then return 'MISSING' end
end
for i = 7 + n, #ARGV, 2 do redis.call('HSETNX', KEYS[2], ARGV[i], ARGV[i + 1]) end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
redis.call('ZADD', KEYS[3], 0, ARGV[1])
redis.call('ZADD', KEYS[4], 0, ARGV[3])
redis.call('ZADD', KEYS[5], 0, ARGV[4])
local t = redis.call('TIME')
redis.call('ZADD', KEYS[6], tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000), ARGV[5])
return 'OK'`,
  },
  // KEYS: the checkpoint's writes hash, the thread's writekeys set. ARGV: (field, record, special 0|1)
  // triples. A regular write never replaces a stored one; a special write (negative idx) does.
  waypointLgPutWrites: {
    keys: 2,
    lua: `
for i = 1, #ARGV, 3 do
  if ARGV[i + 2] == '1' then redis.call('HSET', KEYS[1], ARGV[i], ARGV[i + 1])
  else redis.call('HSETNX', KEYS[1], ARGV[i], ARGV[i + 1]) end
end
redis.call('SADD', KEYS[2], KEYS[1])
return 'OK'`,
  },
  // KEYS: by-ns, checkpoints. ARGV: max, min (ZREVRANGEBYLEX bounds of one namespace).
  // Returns { field, record } of the namespace's newest checkpoint, or nil.
  waypointLgLatest: {
    keys: 2,
    readOnly: true,
    lua: `
local m = redis.call('ZREVRANGEBYLEX', KEYS[1], ARGV[1], ARGV[2], 'LIMIT', 0, 1)[1]
if not m then return false end
local record = redis.call('HGET', KEYS[2], m)
if not record then return false end
return { m, record }`,
  },
  // KEYS: checkpoints, blobs, writekeys, by-ns, by-id, all-checkpoints, threads. ARGV: thread id.
  waypointLgDeleteThread: {
    keys: 7,
    lua: `
for _, m in ipairs(redis.call('ZRANGE', KEYS[5], 0, -1)) do
  local sep = string.find(m, '\\0', 1, true)
  redis.call('ZREM', KEYS[6], string.sub(m, 1, sep - 1) .. '\\0' .. ARGV[1] .. '\\0' .. string.sub(m, sep + 1))
end
for _, k in ipairs(redis.call('SMEMBERS', KEYS[3])) do redis.call('DEL', k) end
redis.call('DEL', KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5])
redis.call('ZREM', KEYS[7], ARGV[1])
return 'OK'`,
  },
  // KEYS: checkpoints, blobs, writekeys, by-ns, by-id, all-checkpoints. ARGV: thread id, keep, writes-key
  // stem. Drops the checkpoints past the newest 'keep' of each namespace with their writes, then every
  // blob no remaining checkpoint references. Returns { checkpoints, writes, blobs } removed.
  waypointLgPrune: {
    keys: 6,
    lua: `
local keep = tonumber(ARGV[2])
local members = redis.call('ZRANGE', KEYS[4], 0, -1)
local seen, removed, writes = {}, 0, 0
for i = #members, 1, -1 do
  local m = members[i]
  local sep = string.find(m, '\\0', 1, true)
  local ns, id = string.sub(m, 1, sep - 1), string.sub(m, sep + 1)
  seen[ns] = (seen[ns] or 0) + 1
  if seen[ns] > keep then
    redis.call('HDEL', KEYS[1], m)
    redis.call('ZREM', KEYS[4], m)
    redis.call('ZREM', KEYS[5], id .. '\\0' .. ns)
    redis.call('ZREM', KEYS[6], id .. '\\0' .. ARGV[1] .. '\\0' .. ns)
    local wk = ARGV[3] .. m
    writes = writes + redis.call('HLEN', wk)
    redis.call('DEL', wk)
    redis.call('SREM', KEYS[3], wk)
    removed = removed + 1
  end
end
-- A record that does not parse stops the script here, before any blob is deleted.
local referenced = {}
for _, record in ipairs(redis.call('HVALS', KEYS[1])) do
  for _, ref in pairs(cjson.decode(cjson.decode(record).ch)) do referenced[ref[2]] = true end
end
local blobs = 0
for _, address in ipairs(redis.call('HKEYS', KEYS[2])) do
  if not referenced[address] then
    redis.call('HDEL', KEYS[2], address)
    blobs = blobs + 1
  end
end
return { removed, writes, blobs }`,
  },
} satisfies Record<string, { keys: number; lua: string; readOnly?: boolean }>;

type Arg = string | number | Buffer;
/** The scripts as methods of the client (ioredis defineCommand: keys first, then args). */
export type LangGraphScripts = { [name in keyof typeof SCRIPTS]: (...keysThenArgs: Arg[]) => Promise<unknown> };

/** Registers the scripts on a client (names `waypointLg*`, so a caller's own client is safe to use). */
export function defineLangGraphScripts(client: Redis): Redis & LangGraphScripts {
  for (const [name, def] of Object.entries(SCRIPTS) as [string, { keys: number; lua: string; readOnly?: boolean }][]) {
    client.defineCommand(name, { numberOfKeys: def.keys, lua: def.lua, readOnly: def.readOnly });
  }
  return client as Redis & LangGraphScripts;
}
