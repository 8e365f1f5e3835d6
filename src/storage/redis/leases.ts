import type { LeaseGrant } from '../../contract/checkpoint-store';
import type { RedisStoreContext } from './context';

// The lease operations of the Redis store (RedisCheckpointStore). Expiry is judged by the server's clock.
// Renewals are not journaled: they only move the expiry, which a replica does not need.

export async function acquireLease(ctx: RedisStoreContext, runId: string, owner: string, ttlMs: number, takeOverFrom?: string): Promise<LeaseGrant | null> {
  const grant = (await ctx.write('waypointAcquireLease', { r: runId, k: 'u' }, ctx.keys.run(runId), owner, ttlMs, takeOverFrom ?? '')) as [number, string] | null;
  return grant ? { owner, epoch: Number(grant[0]), expiresAt: new Date(Number(grant[1])) } : null;
}

export async function renewLease(ctx: RedisStoreContext, runId: string, owner: string, epoch: number, ttlMs: number): Promise<boolean> {
  return (await ctx.client.waypointRenewLease(ctx.keys.run(runId), owner, epoch, ttlMs)) === 1;
}

export function releaseLease(ctx: RedisStoreContext, runId: string, owner: string, epoch: number): Promise<unknown> {
  return ctx.write('waypointReleaseLease', { r: runId, k: 'u' }, ctx.keys.run(runId), owner, epoch);
}
