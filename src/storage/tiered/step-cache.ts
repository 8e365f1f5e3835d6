import type { Redis } from 'ioredis';
import type { StepRecord, StepsChange } from '../../contract/checkpoint-store';
import { decodeStep, encodeStep } from '../redis/codec';

/**
 * Write-through mode's Redis copy of each run's step log: one hash per run, `sequence -> step JSON`, plus
 * `_last`, the sequence the copy reaches. The copy is never trusted on its own: a load compares it with
 * PostgreSQL's run row and first/last step (see {@link cachedSteps}), so a copy that missed a write
 * (Redis was down, a write was reordered, a process died between the two tiers) is a miss, not a wrong
 * answer. The scripts keep it contiguous: a step that does not extend the copy by exactly one drops it.
 *
 * Payloads rewritten in place (re-encryption) keep every checkpoint id, so the stamp cannot see them:
 * `invalidate` drops the copy and bumps the run's generation (`<prefix>gen:{<runId>}`), and a refill
 * from a PostgreSQL read made before that bump is refused, so the old text never comes back.
 *
 * Keys: `<prefix>steps:{<runId>}` and `<prefix>gen:{<runId>}` (hash-tagged, one slot on a cluster).
 *
 * @example
 * const cache = new StepCache(client, 'waypoint:tier:', 86_400);
 * await cache.append(step);          // after PostgreSQL committed it
 * const hash = await cache.read(runId);
 */
export class StepCache {
  constructor(
    private readonly client: Redis & CacheScripts,
    private readonly prefix: string,
    private readonly ttlSeconds: number,
  ) {}

  static define(client: Redis): Redis & CacheScripts {
    for (const [name, lua] of Object.entries(SCRIPTS)) client.defineCommand(name, { numberOfKeys: 1, lua });
    for (const [name, lua] of Object.entries(GENERATION_SCRIPTS)) client.defineCommand(name, { numberOfKeys: 2, lua });
    return client as Redis & CacheScripts;
  }

  key(runId: string): string {
    return `${this.prefix}steps:{${runId}}`;
  }

  generationKey(runId: string): string {
    return `${this.prefix}gen:{${runId}}`;
  }

  /** Extends the copy by `step`; 'ABSENT' when there is no copy (a later load fills it), 'DROPPED' on a gap. */
  async append(step: StepRecord): Promise<string> {
    return this.appendMany(step.runId, [step]);
  }

  /**
   * Extends the copy by these steps of one run, in order, with one command (see `waypointTierAppendMany`):
   * 'OK', 'ABSENT' when there is no copy (a later load fills it), 'DROPPED' when a step does not extend it by one.
   */
  async appendMany(runId: string, steps: readonly StepRecord[]): Promise<string> {
    const args: (string | number)[] = [this.key(runId), this.ttlSeconds * 1000];
    for (const step of steps) args.push(step.sequence, encodeStep(step));
    return (await this.client.waypointTierAppendMany(...args)) as string;
  }

  /**
   * Mirrors `replaceSteps`: a truncation (no rows, to the end) or a fold into one base row (from the start,
   * with `onlyIfBefore`) is applied to the copy; any other change invalidates it, and it is refilled on read.
   */
  replace(runId: string, change: StepsChange): Promise<void> {
    const base = change.rows.length === 1 ? change.rows[0] : undefined;
    if (change.toSequence === undefined && change.rows.length === 0) return this.truncate(runId, change.fromSequence);
    if (base && change.fromSequence <= 1 && change.onlyIfBefore === base.sequence && change.toSequence === base.sequence) return this.compact(runId, base);
    return this.invalidate(runId);
  }

  /** Drops entries from `fromSequence` on (a truncation). */
  async truncate(runId: string, fromSequence: number): Promise<void> {
    await this.client.waypointTierTruncate(this.key(runId), fromSequence);
  }

  /** The base replaces every entry at or below its sequence (retention), unless the oldest entry is already there. */
  async compact(runId: string, base: StepRecord): Promise<void> {
    await this.client.waypointTierCompact(this.key(runId), base.sequence, encodeStep(base));
  }

  /**
   * Replaces the copy with these steps (a PostgreSQL snapshot: contiguous, up to `lastSequence`). With
   * `generation` (what `read` returned before that snapshot was taken), only if no `invalidate` came in
   * between; 'STALE' when one did (nothing written).
   */
  async fill(runId: string, lastSequence: number, steps: readonly StepRecord[], generation?: string): Promise<string> {
    const pairs: string[] = ['_last', String(lastSequence)];
    for (const step of steps) pairs.push(String(step.sequence), encodeStep(step));
    const check = generation === undefined ? ['0', ''] : ['1', generation];
    return (await this.client.waypointTierFill(this.key(runId), this.generationKey(runId), ...check, this.ttlSeconds, ...pairs)) as string;
  }

  /** Drops the copy and bumps the run's generation, so no refill from an older PostgreSQL read lands. */
  async invalidate(runId: string): Promise<void> {
    await this.client.waypointTierInvalidate(this.key(runId), this.generationKey(runId), this.ttlSeconds);
  }

  async drop(runId: string): Promise<void> {
    await this.client.del(this.key(runId));
  }

  /** The raw copy (empty object when there is none) and the run's generation ('' before any invalidation), read together. */
  async read(runId: string): Promise<{ hash: Record<string, string>; generation: string }> {
    const replies = await this.client.multi().hgetall(this.key(runId)).get(this.generationKey(runId)).exec();
    const failed = replies?.find(([error]) => error)?.[0];
    if (failed) throw failed;
    // plain Error: a Redis protocol invariant; the tiered store handles it as any failed Redis read.
    if (!replies) throw new Error('MULTI was discarded');
    return { hash: replies[0][1] as Record<string, string>, generation: (replies[1][1] as string | null) ?? '' };
  }
}

/** What PostgreSQL says a run's step log is, to check a cached copy against. */
export interface StepLogStamp {
  lastSequence: number;
  first: { sequence: number; checkpointId: string } | null;
  last: { sequence: number; checkpointId: string } | null;
}

/**
 * The cached steps when the copy matches PostgreSQL's stamp, else null. Both logs are contiguous from
 * their first row to `lastSequence` (PostgreSQL by the store contract, the copy by the scripts), and a
 * rewritten step always gets a new random checkpoint id (truncation and re-append, or retention's base
 * row), so equal first and last rows mean equal logs.
 */
export function cachedSteps(runId: string, stamp: StepLogStamp, hash: Record<string, string>): StepRecord[] | null {
  if (hash._last === undefined || Number(hash._last) !== stamp.lastSequence) return null;
  const steps: StepRecord[] = [];
  try {
    for (const [field, value] of Object.entries(hash)) if (field !== '_last') steps.push(decodeStep(runId, field, value));
  } catch {
    return null; // an unreadable entry is just a miss here: PostgreSQL holds the real row
  }
  if (steps.length === 0) return stamp.first === null ? steps : null;
  steps.sort((a, b) => a.sequence - b.sequence);
  const first = steps[0];
  const last = steps[steps.length - 1];
  if (!stamp.first || !stamp.last) return null;
  if (last.sequence - first.sequence + 1 !== steps.length || last.sequence !== stamp.lastSequence) return null;
  if (first.sequence !== stamp.first.sequence || first.checkpointId !== stamp.first.checkpointId) return null;
  if (last.sequence !== stamp.last.sequence || last.checkpointId !== stamp.last.checkpointId) return null;
  return steps;
}

type Arg = string | number;
export type CacheScripts = { [name in keyof typeof SCRIPTS | keyof typeof GENERATION_SCRIPTS]: (...keysThenArgs: Arg[]) => Promise<unknown> };

// Entries are HDEL'd in chunks: unpack() of thousands of arguments would overflow the Lua C stack.
const HDEL_RANGE = `
local function hdel_range(key, from, to)
  local i = from
  while i <= to do
    local fields = {}
    for s = i, math.min(i + 999, to) do fields[#fields + 1] = tostring(s) end
    redis.call('HDEL', key, unpack(fields))
    i = i + 1000
  end
end
`;

const SCRIPTS = {
  // KEYS: steps. ARGV: ttl_ms, then sequence, step_json for each step, in order. Returns 'OK' | 'ABSENT' | 'DROPPED'.
  // Each step must extend the copy by exactly one; the same step again (a write replayed late) is
  // skipped; anything else means a write was missed, and the copy is dropped.
  waypointTierAppendMany: `
local last = redis.call('HGET', KEYS[1], '_last')
if not last then return 'ABSENT' end
last = tonumber(last)
local extended = false
for i = 2, #ARGV, 2 do
  local seq = tonumber(ARGV[i])
  if seq == last + 1 then
    redis.call('HSET', KEYS[1], ARGV[i], ARGV[i + 1])
    last = seq
    extended = true
  elseif not (seq <= last and redis.call('HGET', KEYS[1], ARGV[i]) == ARGV[i + 1]) then
    redis.call('DEL', KEYS[1])
    return 'DROPPED'
  end
end
if extended then
  redis.call('HSET', KEYS[1], '_last', string.format('%d', last))
  redis.call('PEXPIRE', KEYS[1], ARGV[1])
end
return 'OK'`,
  // KEYS: steps. ARGV: from_sequence. Mirrors truncateSteps.
  waypointTierTruncate:
    HDEL_RANGE +
    `
local last = redis.call('HGET', KEYS[1], '_last')
if not last then return 'ABSENT' end
last = tonumber(last)
local from = math.max(tonumber(ARGV[1]), 1)
hdel_range(KEYS[1], from, last)
redis.call('HSET', KEYS[1], '_last', string.format('%d', math.min(last, from - 1)))
return 'OK'`,
  // KEYS: steps. ARGV: base_sequence, base_json. Mirrors compactSteps (a no-op unless an older entry exists).
  waypointTierCompact:
    HDEL_RANGE +
    `
if not redis.call('HGET', KEYS[1], '_last') then return 'ABSENT' end
local base = tonumber(ARGV[1])
local oldest = nil
for _, f in ipairs(redis.call('HKEYS', KEYS[1])) do
  local s = tonumber(f)
  if s and (oldest == nil or s < oldest) then oldest = s end
end
if oldest == nil or oldest >= base then return 'OK' end
hdel_range(KEYS[1], oldest, base)
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
return 'OK'`,
} as const;

/** Scripts on a run's copy and its generation key (KEYS: steps, generation). */
const GENERATION_SCRIPTS = {
  // ARGV: check ('1' = only when the generation is still ARGV[2]), generation, ttl_s, then field, value
  // pairs (`_last` first). HSET in chunks: unpack() of thousands of arguments would overflow the Lua C stack.
  // Returns 'OK' | 'STALE'.
  waypointTierFill: `
if ARGV[1] == '1' and (redis.call('GET', KEYS[2]) or '') ~= ARGV[2] then return 'STALE' end
redis.call('DEL', KEYS[1])
local i = 4
while i <= #ARGV do
  local args = {}
  for j = i, math.min(i + 1999, #ARGV) do args[#args + 1] = ARGV[j] end
  redis.call('HSET', KEYS[1], unpack(args))
  i = i + 2000
end
redis.call('EXPIRE', KEYS[1], ARGV[3])
return 'OK'`,
  // ARGV: ttl_s. Drops the copy and bumps the generation (kept as long as a copy would be).
  waypointTierInvalidate: `
redis.call('INCR', KEYS[2])
redis.call('EXPIRE', KEYS[2], ARGV[1])
redis.call('DEL', KEYS[1])
return 'OK'`,
} as const;
