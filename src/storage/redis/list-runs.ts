import type { Redis } from 'ioredis';
import type { RunFilter, RunRecord, RunStatus } from '../../contract/checkpoint-store';
import { toRunRecord } from './codec';
import { ALL_STATUSES, type RedisKeys } from './keys';
import type { PipelineScripts } from './scripts';

/**
 * `listRuns` over the sorted-set indexes, never the keyspace: the most selective index is read
 * newest-first in pages (one page per source per round trip, plus one round trip for the run hashes),
 * merged when several statuses are asked for, and stops once `limit` matching runs are known in order.
 *
 * An index entry whose run hash is gone (a finished run expired by `finishedRunTtlSeconds`) is dropped
 * from the indexes here, lazily; the pipeline index it sits in is only known when listing by pipeline,
 * so there it goes when that pipeline is listed. Listing is not a snapshot: a run updated while pages are read may be
 * missed or seen at its newer position, as with any paginated listing.
 *
 * @example
 * const runs = await listRunsFromIndexes(client, redisKeys(), { status: ['paused', 'failed'], limit: 20 });
 */
export async function listRunsFromIndexes(client: Redis, keys: RedisKeys, filter: RunFilter = {}): Promise<RunRecord[]> {
  const statuses = filter.status === undefined ? null : new Set<RunStatus>(Array.isArray(filter.status) ? filter.status : [filter.status]);
  const limit = filter.limit ?? Number.POSITIVE_INFINITY;
  if ((statuses && statuses.size === 0) || limit <= 0) return [];
  if (filter.parentRunId !== undefined) return listChildRuns(client, keys, filter.parentRunId, statuses, filter, limit);

  const sourceKeys = filter.pipelineName !== undefined ? [keys.pipelineIndex(filter.pipelineName)] : statuses ? [...statuses].map((s) => keys.statusIndex(s)) : [keys.runsIndex()];
  const min = filter.since ? String(filter.since.getTime()) : '-inf';
  const pageSize = Number.isFinite(limit) ? Math.min(Math.max(limit * 2, 50), 1000) : 1000;
  const sources = sourceKeys.map((key) => ({ key, offset: 0, done: false, lowest: Number.POSITIVE_INFINITY }));

  const seen = new Set<string>();
  const matches: { run: RunRecord; score: number }[] = [];
  const matching = (run: RunRecord): boolean =>
    (statuses === null || statuses.has(run.status)) &&
    (filter.pipelineName === undefined || run.pipelineName === filter.pipelineName) &&
    (filter.since === undefined || run.updatedAt.getTime() >= filter.since.getTime());

  for (;;) {
    const active = sources.filter((s) => !s.done);
    const read = client.pipeline();
    for (const s of active) read.zrange(s.key, '+inf', min, 'BYSCORE', 'REV', 'LIMIT', s.offset, pageSize, 'WITHSCORES');
    const pages = await execOrThrow(read);

    const fresh: { runId: string; score: number }[] = [];
    active.forEach((source, i) => {
      const flat = pages[i] as string[];
      for (let j = 0; j + 1 < flat.length; j += 2) {
        const runId = flat[j];
        if (!seen.has(runId)) fresh.push({ runId, score: Number(flat[j + 1]) });
        seen.add(runId);
      }
      source.offset += flat.length / 2;
      if (flat.length / 2 < pageSize) source.done = true;
      else source.lowest = Number(flat[flat.length - 1]);
    });

    if (fresh.length > 0) {
      const fetch = client.pipeline();
      for (const f of fresh) fetch.hgetall(keys.run(f.runId));
      const hashes = await execOrThrow(fetch);
      const stale: string[] = [];
      fresh.forEach((f, i) => {
        const run = toRunRecord(hashes[i] as Record<string, string>);
        if (run && matching(run)) matches.push({ run, score: f.score });
        else if (!run || (filter.pipelineName !== undefined && run.pipelineName !== filter.pipelineName)) stale.push(f.runId);
      });
      if (stale.length > 0) await dropStale(client, keys, stale, filter.pipelineName, sourceKeys);
    }

    // Every entry scored above the highest page boundary among unfinished sources has been read from
    // every source; entries at or below it may still have unread peers, so they cannot be ranked yet.
    const boundary = Math.max(Number.NEGATIVE_INFINITY, ...sources.filter((s) => !s.done).map((s) => s.lowest));
    const ranked = matches.filter((m) => m.score > boundary);
    if (sources.every((s) => s.done) || ranked.length >= limit) {
      return ranked
        .map((m) => m.run)
        .sort((a, b) => b.updatedAt.getTime() - a.updatedAt.getTime() || a.runId.localeCompare(b.runId))
        .slice(0, limit);
    }
  }
}

/**
 * A parent's children: its parent index (scored by creation, never rewritten by a step append) read
 * whole, since its order is not the listing's; the other filters and the order applied to the hashes.
 * Children whose hash is gone leave the index here (re-checked by waypointDropStale).
 */
async function listChildRuns(client: Redis, keys: RedisKeys, parentRunId: string, statuses: Set<RunStatus> | null, filter: RunFilter, limit: number): Promise<RunRecord[]> {
  const parentIndex = keys.parentIndex(parentRunId);
  const runIds = await client.zrange(parentIndex, 0, -1);
  if (runIds.length === 0) return [];
  const fetch = client.pipeline();
  for (const runId of runIds) fetch.hgetall(keys.run(runId));
  const hashes = await execOrThrow(fetch);
  const runs: RunRecord[] = [];
  const stale: string[] = [];
  runIds.forEach((runId, i) => {
    const run = toRunRecord(hashes[i] as Record<string, string>);
    if (!run) stale.push(runId);
    else if (
      run.parentRunId === parentRunId &&
      (statuses === null || statuses.has(run.status)) &&
      (filter.pipelineName === undefined || run.pipelineName === filter.pipelineName) &&
      (filter.since === undefined || run.updatedAt.getTime() >= filter.since.getTime())
    )
      runs.push(run);
  });
  if (stale.length > 0) {
    const drop = client.pipeline();
    const scripts = drop as unknown as PipelineScripts;
    for (const runId of stale) scripts.waypointDropStale(keys.run(runId), parentIndex, runId, '');
    await execOrThrow(drop);
  }
  return runs.sort((a, b) => b.updatedAt.getTime() - a.updatedAt.getTime() || a.runId.localeCompare(b.runId)).slice(0, limit);
}

/** Drops stale index entries (see the waypointDropStale script, which re-checks each one atomically). */
async function dropStale(client: Redis, keys: RedisKeys, runIds: string[], pipelineName: string | undefined, readKeys: string[]): Promise<void> {
  const indexes = [...new Set([keys.runsIndex(), ...ALL_STATUSES.map((s) => keys.statusIndex(s)), ...readKeys])];
  const drop = client.pipeline();
  const scripts = drop as unknown as PipelineScripts;
  // Without a pipeline filter the run's pipeline index is unknown; the global index stands in for it.
  const pipelineIndex = pipelineName === undefined ? keys.runsIndex() : keys.pipelineIndex(pipelineName);
  for (const runId of runIds) scripts.waypointDropStale(keys.run(runId), pipelineIndex, runId, pipelineName ?? '', ...indexes);
  await execOrThrow(drop);
}

/** Runs a pipeline and returns its results, throwing the first command error (ioredis reports them per command). */
export async function execOrThrow(pipeline: ReturnType<Redis['pipeline']>): Promise<unknown[]> {
  const results = (await pipeline.exec()) ?? [];
  return results.map(([error, value]) => {
    if (error) throw error;
    return value;
  });
}
