import type { Redis } from 'ioredis';
import { ALL_STATUSES, redisKeys, type RedisKeys } from '../redis/keys';
import { parseJournalEntry } from '../redis/journal';

/**
 * How far a run's lease epoch is raised when it is brought back into Redis from PostgreSQL. After Redis
 * lost data, PostgreSQL's epoch may be behind epochs already handed out; jumping past them keeps every
 * executor that still holds one fenced out (it would take 65 536 unflushed lease takeovers of one run
 * to reach a stale epoch again).
 */
export const HYDRATION_EPOCH_JUMP = 65_536;

/**
 * How the write-behind store tells which of its two copies of a run is ahead. Each copy is a contiguous
 * step log; a row's checkpoint id is a random UUID given when the row is written, so two rows at one
 * sequence with the same id are the same write, and (every row being chained to the one before it) the
 * two logs agree up to there. Comparing the shorter copy's last row with the longer copy's row at that
 * sequence therefore says whether the longer one extends it. Payload rewrites (re-encryption) keep the
 * ids, so they never look like a divergence.
 */

/** Where a row sits in its copy: what two copies are compared by. */
export interface RowId {
  sequence: number;
  checkpointId: string;
}

/** One tier's copy, as far as the comparison needs it. */
export interface CopyShape {
  lastSequence: number;
  /** The copy's first stored row (a base row after retention may start past 1); null when it has none. */
  firstSequence: number | null;
  /** The copy's row at the comparison point (`comparePoint`), null when it has none there. */
  row: RowId | null;
}

export type TierVerdict =
  /** Redis's copy extends PostgreSQL's (or equals it): the normal state of write-behind. */
  | { kind: 'redis-ahead' }
  /** PostgreSQL's copy extends Redis's: Redis lost writes PostgreSQL had already received. */
  | { kind: 'postgres-ahead' }
  /** Neither extends the other: their rows at `sequence` differ. */
  | { kind: 'diverged'; sequence: number };

/** The sequence the two copies are compared at: the shorter copy's last one. */
export function comparePoint(redisLast: number, postgresLast: number): number {
  return Math.min(redisLast, postgresLast);
}

/**
 * Which copy is ahead, by sequence and by link. A copy with no row at the comparison point because
 * retention folded its rows up to a base row past it still covers that history (retention goes through
 * the journal like every other change), so it counts as extending the other.
 *
 * @example
 * judgeCopies({ lastSequence: 15, firstSequence: 1, row: r15 }, { lastSequence: 40, firstSequence: 1, row: pg15 }); // postgres-ahead when r15 and pg15 are one row
 */
export function judgeCopies(redis: CopyShape, postgres: CopyShape): TierVerdict {
  const at = comparePoint(redis.lastSequence, postgres.lastSequence);
  const ahead: TierVerdict = postgres.lastSequence > redis.lastSequence ? { kind: 'postgres-ahead' } : { kind: 'redis-ahead' };
  if (at === 0) return ahead;
  if (redis.row && postgres.row && redis.row.sequence === at && postgres.row.sequence === at && redis.row.checkpointId === postgres.row.checkpointId) return ahead;
  const longer = ahead.kind === 'postgres-ahead' ? postgres : redis;
  const shorter = ahead.kind === 'postgres-ahead' ? redis : postgres;
  if (!longer.row && longer.firstSequence !== null && longer.firstSequence > at && shorter.row) return ahead;
  return { kind: 'diverged', sequence: at };
}

/**
 * True when the journal still holds (after `afterId`, exclusive; '-' for all of it) a change to the run
 * that reshapes its log rather than extending it: a truncation, a retention fold, a payload rewrite or a
 * delete. Until the flusher has applied it, PostgreSQL's copy may legitimately differ from Redis's at the
 * same sequence. Read in pages; only called when the copies disagree, never on the way of a step.
 */
export async function pendingReshape(client: Redis, stream: string, runId: string, afterId = '-'): Promise<boolean> {
  let start = afterId === '-' ? '-' : `(${afterId}`;
  for (;;) {
    const page = (await client.xrange(stream, start, '+', 'COUNT', 1000)) as [string, string[]][];
    for (const [, fields] of page) {
      const entry = parseJournalEntry(fields);
      if (entry.r === runId && (entry.k === 'd' || entry.t !== undefined || entry.c !== undefined || entry.p !== undefined)) return true;
    }
    if (page.length < 1000) return false;
    start = `(${page[page.length - 1][0]}`;
  }
}

// KEYS: run, steps, ops, runs_idx. ARGV: expected last_sequence ('' = any), op stem, status stem, pipeline
// stem, then every status. Deletes the run's copy (hashes, operation records, index entries) unless its
// last_sequence moved since it was judged. Not journaled: PostgreSQL keeps its copy, which is the point.
// Returns 'DROPPED' | 'CHANGED' | 'ABSENT'.
const DROP_COPY = `
local last = redis.call('HGET', KEYS[1], 'last_sequence')
if not last then return 'ABSENT' end
if ARGV[1] ~= '' and last ~= ARGV[1] then return 'CHANGED' end
local run_id = redis.call('HGET', KEYS[1], 'run_id')
local pipeline = redis.call('HGET', KEYS[1], 'pipeline_name')
for _, op in ipairs(redis.call('LRANGE', KEYS[3], 0, -1)) do redis.call('DEL', ARGV[2] .. op) end
redis.call('DEL', KEYS[1], KEYS[2], KEYS[3])
redis.call('ZREM', KEYS[4], run_id)
if pipeline then redis.call('ZREM', ARGV[4] .. pipeline, run_id) end
for i = 5, #ARGV do redis.call('ZREM', ARGV[3] .. ARGV[i], run_id) end
return 'DROPPED'`;

export type DropScripts = { waypointTierDropCopy: (...keysThenArgs: string[]) => Promise<unknown> };

/**
 * Drops Redis's copy of a run without a journal entry (see DROP_COPY), so the copy can be replaced by
 * PostgreSQL's. `expectedLast`: only if the copy still ends at that sequence (a write since means the
 * judgment is stale).
 *
 * @example
 * const dropper = new CopyDropper(client, 'waypoint:tier:');
 * await dropper.drop('q3-aapl', 15); // 'DROPPED'
 */
export class CopyDropper {
  private readonly client: Redis & DropScripts;
  private readonly keys: RedisKeys;

  constructor(client: Redis, keyPrefix: string) {
    client.defineCommand('waypointTierDropCopy', { numberOfKeys: 4, lua: DROP_COPY });
    this.client = client as Redis & DropScripts;
    this.keys = redisKeys(keyPrefix);
  }

  async drop(runId: string, expectedLast?: number): Promise<'DROPPED' | 'CHANGED' | 'ABSENT'> {
    const k = this.keys;
    const reply = await this.client.waypointTierDropCopy(
      k.run(runId),
      k.steps(runId),
      k.runOperations(runId),
      k.runsIndex(),
      expectedLast === undefined ? '' : String(expectedLast),
      k.stems.operation,
      k.stems.status,
      k.stems.pipeline,
      ...ALL_STATUSES,
    );
    return reply as 'DROPPED' | 'CHANGED' | 'ABSENT';
  }
}
