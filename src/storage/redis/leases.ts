import type { LeaseGrant } from '../../contract/checkpoint-store';
import type { RedisStoreContext } from './context';

// The lease operations of the Redis store (RedisCheckpointStore). Expiry is judged by the server's clock.
// Renewals are not journaled: they only move the expiry, which a replica does not need.

export async function acquireLease(ctx: RedisStoreContext, runId: string, owner: string, ttlMs: number, takeOverFrom?: string): Promise<LeaseGrant | null> {
  const grant = (await ctx.write('waypointAcquireLease', { r: runId, k: 'u' }, ctx.keys.run(runId), owner, ttlMs, takeOverFrom ?? '')) as [number, string] | null;
  return grant ? { owner, epoch: Number(grant[0]), expiresAt: new Date(Number(grant[1])) } : null;
}

/** Renewing (a ttl) is not journaled; freeing the lease (null) is, as a change of the run row. */
export async function setLeaseExpiry(ctx: RedisStoreContext, runId: string, owner: string, epoch: number, ttlMs: number | null): Promise<boolean> {
  const key = ctx.keys.run(runId);
  const set = ttlMs === null ? ctx.write('waypointSetLeaseExpiry', { r: runId, k: 'u' }, key, owner, epoch, '') : ctx.client.waypointSetLeaseExpiry(key, owner, epoch, ttlMs);
  return Number(await set) === 1;
}
