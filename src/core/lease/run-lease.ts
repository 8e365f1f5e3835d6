import { hostname } from 'node:os';
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import type { CheckpointStore, Fence, LeaseGrant } from '../../contract/checkpoint-store';
import type { Clock } from '../../contract/clock';
import { LeaseLostError, RunLockedError } from '../../contract/errors';
import { describeError } from '../../contract/errors';
import type { Logger } from '../../contract/logger';
import type { ResolvedOptions } from '../run/options';
import { isLiveWorker, registerLeaseCheck, registerLiveWorker } from './process-registry';

/**
 * Holds one run's lease for an executor: acquires it (optionally waiting for another owner's lease),
 * renews it on a heartbeat, reports its loss, and releases it. The epoch it holds is the fence every
 * checkpoint write carries.
 *
 * @example
 * const keeper = await LeaseKeeper.acquire(store, clock, logger, runId, options, 0);
 * try { await store.appendStep({ ..., fence: keeper.fence }); } finally { await keeper.release(); }
 */
export class LeaseKeeper {
  private timer: NodeJS.Timeout | undefined;
  private lost: LeaseLostError | undefined;
  private listeners: ((error: LeaseLostError) => void)[] = [];
  private released = false;
  private readonly unregister: () => void;
  private readonly unregisterCheck: () => void;

  private constructor(
    private readonly store: CheckpointStore,
    private readonly logger: Logger,
    readonly runId: string,
    private readonly grant: LeaseGrant,
    private readonly ttlMs: number,
    heartbeatMs: number,
  ) {
    this.timer = setInterval(() => void this.renew(), heartbeatMs);
    this.timer.unref();
    // While this lease is held, its owner is alive here, even if the Waypoint that took it is closed meanwhile.
    this.unregister = registerLiveWorker(grant.owner);
    // A cancel in this process (waypoint.cancel) asks for a renewal at once, so a fenced-out step stops now.
    this.unregisterCheck = registerLeaseCheck(runId, () => void this.renew());
  }

  static async acquire(store: CheckpointStore, clock: Clock, logger: Logger, runId: string, options: ResolvedOptions, waitForLockMs: number): Promise<LeaseKeeper> {
    const deadline = clock.now().getTime() + waitForLockMs;
    for (;;) {
      const grant = await store.acquireLease(runId, options.workerId, options.leaseTtlMs);
      if (grant) {
        logger.info('lease acquired', { runId, owner: grant.owner, epoch: grant.epoch });
        return new LeaseKeeper(store, logger, runId, grant, options.leaseTtlMs, options.heartbeatMs);
      }
      const run = await store.getRun(runId);
      const holder = run?.leaseOwner ?? null;
      if (holder && holderIsDead(holder)) {
        // A restarted process on the same host finds its dead predecessor's lease: take it over now
        // instead of waiting out the TTL. The epoch still increments, so the old holder stays fenced.
        const taken = await store.acquireLease(runId, options.workerId, options.leaseTtlMs, holder);
        if (taken) {
          logger.warn('took over the lease of a dead executor on this host', { runId, deadOwner: holder, epoch: taken.epoch });
          return new LeaseKeeper(store, logger, runId, taken, options.leaseTtlMs, options.heartbeatMs);
        }
        continue;
      }
      const remaining = deadline - clock.now().getTime();
      if (remaining <= 0) throw new RunLockedError(runId, run?.leaseOwner ?? null, run?.leaseExpiresAt ?? null);
      await clock.sleep(Math.min(remaining, Math.max(25, Math.floor(options.leaseTtlMs / 10))));
    }
  }

  get fence(): Fence {
    return { epoch: this.grant.epoch };
  }

  get epoch(): number {
    return this.grant.epoch;
  }

  /** Called once if the lease is lost (taken over after expiry); the executor must stop. */
  onLost(listener: (error: LeaseLostError) => void): void {
    if (this.lost) listener(this.lost);
    else this.listeners.push(listener);
  }

  async release(): Promise<void> {
    if (this.released) return;
    this.released = true;
    clearInterval(this.timer);
    this.unregister();
    this.unregisterCheck();
    if (this.lost) return;
    try {
      await this.store.releaseLease(this.runId, this.grant.owner, this.grant.epoch);
    } catch (error) {
      // The lease then simply expires after its TTL; nothing else depends on the release.
      this.logger.warn('lease release failed; it will expire on its own', { runId: this.runId, error: describeError(error) });
    }
  }

  private async renew(): Promise<void> {
    if (this.released || this.lost) return;
    try {
      const ok = await this.store.renewLease(this.runId, this.grant.owner, this.grant.epoch, this.ttlMs);
      if (ok || this.released) return;
      this.markLost();
    } catch (error) {
      // A store hiccup is not a lost lease: fenced writes decide. Keep trying on the next beat.
      this.logger.warn('lease renewal failed', { runId: this.runId, epoch: this.grant.epoch, error: describeError(error) });
    }
  }

  private markLost(): void {
    this.lost = new LeaseLostError(this.runId, this.grant.epoch);
    clearInterval(this.timer);
    this.logger.error('lease lost; stopping executor', { runId: this.runId, epoch: this.grant.epoch });
    for (const listener of this.listeners.splice(0)) listener(this.lost);
  }
}

/** Default owner id of this process: `host:pid:random`, parseable by `holderIsDead`. */
export function defaultWorkerId(random: string): string {
  return `${hostname()}:${process.pid}:${random}`;
}

/**
 * True when a lease owner id in the default `host:pid:random` form names a process on this host that no
 * longer exists, or an earlier incarnation of this very pid (a container restart gives the new process
 * the old one's pid). An owner id that a Waypoint or a held lease of this process uses is alive (see
 * `registerLiveWorker`): our own pid alone never makes a holder dead, or a second Waypoint in this
 * process would take a run over from the first. Anything else, including owners on other hosts and
 * custom ids, is presumed alive until its lease expires.
 */
export function holderIsDead(owner: string): boolean {
  if (isLiveWorker(owner)) return false;
  const parts = owner.split(':');
  if (parts.length < 3) return false;
  const pid = Number(parts[parts.length - 2]);
  const host = parts.slice(0, -2).join(':');
  if (host !== hostname() || !Number.isInteger(pid) || pid <= 0) return false;
  if (pid === process.pid) return true; // our pid, but no id live in this process: a previous process with our pid
  try {
    process.kill(pid, 0);
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'ESRCH';
  }
  // A process killed a moment ago is a zombie until its parent reaps it, and kill(pid, 0) still succeeds
  // on a zombie: without this, a restart right after a `kill -9` met RUN_LOCKED for up to a lease.
  return isZombie(pid);
}

/**
 * True when `pid` has exited and waits to be reaped (state Z or X). Read from /proc on Linux and from
 * `ps` elsewhere on POSIX (this runs only when a run's lease is contended, never per step). Unknown: false.
 */
export function isZombie(pid: number): boolean {
  try {
    if (process.platform === 'linux') {
      const stat = readFileSync(`/proc/${pid}/stat`, 'latin1');
      // The command name in parentheses may itself hold spaces or parentheses: the state follows the last ')'.
      const state = stat.charAt(stat.lastIndexOf(')') + 2);
      return state === 'Z' || state === 'X';
    }
    if (process.platform === 'win32') return false;
    const ps = spawnSync('ps', ['-o', 'stat=', '-p', String(pid)], { encoding: 'utf8', timeout: 2_000 });
    return ps.status === 0 && ps.stdout.trim().startsWith('Z');
  } catch {
    return false;
  }
}
