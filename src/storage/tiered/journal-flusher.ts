import type { Redis } from 'ioredis';
import type { PoolClient } from 'pg';
import { describeError } from '../../contract/errors';
import type { OperationRecord, RunRecord, StepRecord } from '../../contract/checkpoint-store';
import { parseJournalEntry, type JournalEntry } from '../redis/journal';
import type { RedisCheckpointStore } from '../redis/redis-store';
import type { PgTier } from './pg-tier';
import { operationColumns, pgReplicaStatements, replicaLockKeys, runColumns, stepColumns, type ReplicaStatements } from './replica-sql';
import type { TierHealth } from './tier-health';
import type { TierReconciler } from './tier-reconciler';

export interface FlusherDeps {
  /**
   * The Redis store on the flusher's own connection (`reader`), for reading the runs it copies: the
   * bulk of a batch then never queues behind, or ahead of, the executors' writes.
   */
  hot: RedisCheckpointStore;
  /** That connection: the flusher blocks on it (XREADGROUP BLOCK), and reads the runs between blocks. */
  reader: Redis;
  pg: PgTier;
  stream: string;
  group: string;
  consumer: string;
  blockMs: number;
  batchSize: number;
  health: TierHealth;
  /** Settles a run whose link check failed (on the flusher's own connection, `reader`). */
  reconciler: TierReconciler;
}

const ignore = (): void => undefined;

type StreamEntries = [id: string, fields: string[]][];

/** What a batch copies from Redis to PostgreSQL. */
interface Copy {
  runs: RunRecord[];
  steps: StepRecord[];
  operations: OperationRecord[];
  /** Runs whose Redis row before the copied ones is not PostgreSQL's: nothing of them is written. */
  suspects: string[];
}

/** Where a run's copy starts, and the row before it that must be the same in both tiers (0: none to check). */
interface CopyPlan {
  runId: string;
  w: RunWork;
  from: number;
  link: number;
}

/** What one batch asks of one run, after folding its entries in journal order. */
interface RunWork {
  deleteFirst: boolean;
  sync: boolean;
  truncateFrom?: number;
  compactTo?: number;
  /** Steps from here on were rewritten in place: copy them again even where PostgreSQL has them. */
  rewrittenFrom?: number;
  /** Operations were rewritten in place: copy every operation of the run. */
  allOperations?: boolean;
  operations: Set<string>;
}

/**
 * Applies the write-behind journal to PostgreSQL. Entries are read with XREADGROUP, applied in one
 * PostgreSQL transaction per batch, and only then acknowledged (XACK) and removed (XDEL): an entry is
 * gone from the journal only once its change is committed, so a crash at any point replays it.
 *
 * Applying an entry copies the run's current state from Redis (its row, its steps past what PostgreSQL
 * has, the operations the entry names), so replays and batches that coalesce many entries of one run
 * are idempotent. Rows are copied only onto the history they were chained to: Redis's row just before
 * them must be the row PostgreSQL has there (same checkpoint id), else nothing of the run is written in
 * that batch and `TierReconciler.settleForFlush` decides (a later entry reshapes the run, Redis is behind
 * PostgreSQL and its copy is dropped, or the copies diverged: TIER_DIVERGED). One flusher writes at a time: the role is a PostgreSQL advisory lock held by the
 * session that writes, so a flusher that stalls keeps it (and others wait) and a flusher whose session
 * dies loses it together with its uncommitted transaction. A new flusher first claims what the previous
 * one had read but not acknowledged (XAUTOCLAIM), which precedes everything still unread.
 *
 * @example
 * const reader = client.duplicate();
 * const hot = new RedisCheckpointStore({ client: reader, keyPrefix });
 * const flusher = new JournalFlusher({ hot, reader, pg, stream, group: 'flushers', consumer, blockMs: 50, batchSize: 500, health });
 * flusher.start();
 * await flusher.stop();
 */
export class JournalFlusher {
  private readonly sql: ReplicaStatements;
  private readonly locks: { lead: string; apply: string };
  private leader: PoolClient | null = null;
  private loop: Promise<void> | null = null;
  private stopped = false;
  private readonly halt = new AbortController();
  private failures = 0;
  private pruned = false;

  constructor(private readonly deps: FlusherDeps) {
    this.sql = pgReplicaStatements(deps.pg.tables);
    this.locks = replicaLockKeys(deps.stream, deps.pg.tables.runs);
  }

  start(): void {
    this.loop ??= this.run();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    this.halt.abort();
    this.deps.reader.disconnect(); // ends a blocking read at once
    await this.loop;
    await this.resign();
  }

  private async run(): Promise<void> {
    while (!this.stopped) {
      try {
        if (!this.leader && !(await this.lead())) {
          await this.pause(Math.max(250, this.deps.blockMs * 10)); // another process flushes; look again later
          continue;
        }
        const batch = await this.nextBatch();
        if (batch.length === 0) continue;
        // An id without fields is an entry deleted after it was read: nothing to apply, only to acknowledge.
        const ids = batch.map(([id]) => id);
        await this.apply(
          batch.filter(([, fields]) => fields !== null).map(([, fields]) => parseJournalEntry(fields)),
          ids[ids.length - 1],
        );
        const acked = await this.deps.reader
          .multi()
          .xack(this.deps.stream, this.deps.group, ...ids)
          .xdel(this.deps.stream, ...ids)
          .exec();
        const failure = acked?.find(([error]) => error)?.[0];
        if (failure) throw failure;
        this.deps.health.stats.flushedEntries += ids.length;
        this.failures = 0;
      } catch (error) {
        if (this.stopped) break;
        this.failures += 1;
        this.deps.health.stats.flushFailures += 1;
        if (this.failures === 1 || this.failures % 50 === 0) {
          this.deps.health.log.warn('tiered write-behind: flushing to PostgreSQL failed; the journal keeps the changes and the flusher retries', {
            failures: this.failures,
            error: describeError(error),
          });
        }
        await this.resign(error);
        await this.pause(Math.min(5_000, 100 * 2 ** Math.min(this.failures, 6)));
      }
    }
  }

  /** Takes the flusher role if no other session holds it. */
  private async lead(): Promise<boolean> {
    const client = await this.deps.pg.pool.connect();
    try {
      const { rows } = await client.query<{ led: boolean }>(this.sql.tryLead, [this.locks.lead]);
      if (rows[0]?.led !== true) {
        client.release();
        return false;
      }
    } catch (error) {
      client.release(error as Error);
      throw error;
    }
    // The session is held between batches, outside the pool's care: its connection errors (PostgreSQL
    // going away while the flusher waits on Redis) are reported by the next query, not thrown here.
    client.on('error', ignore);
    this.leader = client;
    this.pruned = false;
    await this.deps.reader.xgroup('CREATE', this.deps.stream, this.deps.group, '0', 'MKSTREAM').catch((error: Error) => {
      if (!/BUSYGROUP/.test(error.message)) throw error;
    });
    return true;
  }

  /** Gives the role up: unlocks and returns the session (destroys it after an error, which also unlocks). */
  private async resign(error?: unknown): Promise<void> {
    const client = this.leader;
    this.leader = null;
    if (!client) return;
    if (error === undefined) {
      await client.query(this.sql.unlead, [this.locks.lead]).catch(() => undefined);
      client.off('error', ignore); // back to the pool, which watches its idle clients itself
      client.release();
    } else {
      client.release(error instanceof Error ? error : true); // any truthy value: the pool destroys the client
    }
  }

  /** Unacknowledged entries first (ours, then a previous flusher's), then new ones. */
  private async nextBatch(): Promise<StreamEntries> {
    const { reader, stream, group, consumer, batchSize, blockMs } = this.deps;
    const mine = (await reader.xreadgroup('GROUP', group, consumer, 'COUNT', batchSize, 'STREAMS', stream, '0')) as [string, StreamEntries][] | null;
    const pending = mine?.[0]?.[1] ?? [];
    if (pending.length > 0) return pending;
    const claimed = (await reader.xautoclaim(stream, group, consumer, 0, '0-0', 'COUNT', batchSize)) as [string, StreamEntries, string[]?];
    if (claimed[1].length > 0) return claimed[1];
    if (!this.pruned) await this.pruneConsumers();
    const fresh = (await reader.xreadgroup('GROUP', group, consumer, 'COUNT', batchSize, 'BLOCK', blockMs, 'STREAMS', stream, '>')) as [string, StreamEntries][] | null;
    return fresh?.[0]?.[1] ?? [];
  }

  /**
   * Forgets the consumers of earlier flushers once their entries were claimed: only a flusher holding
   * the lock reads, so any other consumer belongs to a process that has stopped flushing.
   */
  private async pruneConsumers(): Promise<void> {
    const { reader, stream, group, consumer } = this.deps;
    for (const flat of (await reader.xinfo('CONSUMERS', stream, group)) as string[][]) {
      const info: Record<string, string> = {};
      for (let i = 0; i + 1 < flat.length; i += 2) info[String(flat[i])] = String(flat[i + 1]);
      if (info.name !== consumer && Number(info.pending) === 0) await reader.xgroup('DELCONSUMER', stream, group, info.name);
    }
    this.pruned = true;
  }

  private async apply(entries: JournalEntry[], lastId: string): Promise<void> {
    if (entries.length === 0) return;
    const work = new Map<string, RunWork>();
    for (const entry of entries) {
      if (entry.k === 'd') {
        work.set(entry.r, { deleteFirst: true, sync: false, operations: new Set() }); // what came before is moot
        continue;
      }
      const w = work.get(entry.r) ?? { deleteFirst: false, sync: false, operations: new Set<string>() };
      w.sync = true;
      if (entry.t !== undefined) w.truncateFrom = Math.min(w.truncateFrom ?? entry.t, entry.t);
      if (entry.c !== undefined) w.compactTo = Math.max(w.compactTo ?? entry.c, entry.c);
      if (entry.o !== undefined) w.operations.add(entry.o);
      if (entry.p !== undefined) w.rewrittenFrom = Math.min(w.rewrittenFrom ?? entry.p, entry.p);
      if (entry.a !== undefined) w.allOperations = true;
      work.set(entry.r, w);
    }
    const client = this.leader!;
    await client.query('BEGIN');
    try {
      // From here to COMMIT no delete or copy-back can run: what is read from Redis is still true when written.
      await client.query(this.sql.applyLock, [this.locks.apply]);
      const copy = await this.read(client, work);
      for (const runId of copy.suspects) {
        const outcome = await this.deps.reconciler.settleForFlush(runId, lastId, client);
        this.deps.health.log.debug('tiered write-behind: link check failed; the run was not written in this batch', { runId, outcome });
      }
      await this.write(client, work, copy);
      await client.query('COMMIT');
    } catch (error) {
      await client.query('ROLLBACK').catch(() => undefined);
      throw error;
    }
  }

  /**
   * The state to copy: the runs' current rows, their steps past what PostgreSQL has, the named operations.
   * Redis's row just before the copied ones is read too and must be the row PostgreSQL has there (same
   * checkpoint id): the copied rows are chained to it, so only then do they extend PostgreSQL's history.
   * A run that fails this is a suspect and is not written (see `TierReconciler.settleForFlush`).
   */
  private async read(client: PoolClient, work: Map<string, RunWork>): Promise<Copy> {
    const synced = [...work.entries()].filter(([, w]) => w.sync);
    const { rows } = await client.query<{ run_id: string; last_sequence: string | number }>(this.sql.lastSequences, [
      synced.filter(([, w]) => !w.deleteFirst).map(([runId]) => runId),
    ]);
    const stored = new Map(rows.map((row) => [row.run_id, Number(row.last_sequence)]));
    const plans: CopyPlan[] = synced.map(([runId, w]) => {
      const from = Math.min((stored.get(runId) ?? 0) + 1, w.truncateFrom ?? Infinity, w.compactTo ?? Infinity, w.rewrittenFrom ?? Infinity);
      // A fold in this batch drops PostgreSQL's rows before its base row, which starts the chain over: nothing to link to.
      const folded = w.compactTo !== undefined && w.compactTo > from - 1;
      return { runId, w, from, link: w.deleteFirst || folded ? 0 : from - 1 };
    });
    const linked = plans.filter((p) => p.link > 0);
    const { rows: links } = await client.query<{ run_id: string; checkpoint_id: string }>(this.sql.stepsAt, [linked.map((p) => p.runId), linked.map((p) => p.link)]);
    const expected = new Map(links.map((row) => [row.run_id, row.checkpoint_id]));
    const reads = await Promise.all(
      plans.map(({ runId, w, from, link }) => {
        const operations = w.allOperations ? this.deps.hot.listOperations(runId) : Promise.all([...w.operations].map((key) => this.deps.hot.getOperation(key)));
        return Promise.all([this.deps.hot.readTail(runId, link > 0 ? link : from), operations]);
      }),
    );
    const copy: Copy = { runs: [], steps: [], operations: [], suspects: [] };
    reads.forEach(([tail, operations], i) => {
      if (!tail) return; // gone from Redis (deleted since, or expired): PostgreSQL keeps what it has
      const { runId, link } = plans[i];
      let steps = tail.steps;
      if (link > 0) {
        const own = steps[0]?.sequence === link ? steps[0] : undefined;
        if (own) steps = steps.slice(1);
        const theirs = expected.get(runId);
        if (theirs !== undefined && own?.checkpointId !== theirs) return void copy.suspects.push(runId);
      }
      copy.runs.push(tail.run);
      copy.steps.push(...steps);
      for (const operation of operations) if (operation) copy.operations.push(operation);
    });
    return copy;
  }

  private async write(client: PoolClient, work: Map<string, RunWork>, copy: Copy): Promise<void> {
    const suspects = new Set(copy.suspects);
    for (const [runId, w] of work) {
      if (suspects.has(runId)) continue;
      if (w.deleteFirst) await client.query(this.sql.deleteRun, [runId]);
      if (w.truncateFrom !== undefined) await client.query(this.sql.dropStepsFrom, [runId, w.truncateFrom]);
      if (w.compactTo !== undefined) await client.query(this.sql.dropStepsBefore, [runId, w.compactTo]);
    }
    if (copy.runs.length > 0) await client.query(this.sql.upsertRuns, runColumns(copy.runs));
    if (copy.steps.length > 0) await client.query(this.sql.upsertSteps, stepColumns(copy.steps));
    if (copy.operations.length > 0) await client.query(this.sql.upsertOperations, operationColumns(copy.operations));
  }

  private pause(ms: number): Promise<void> {
    return new Promise((resolve) => {
      const onHalt = () => (clearTimeout(timer), resolve());
      const timer = setTimeout(() => (this.halt.signal.removeEventListener('abort', onHalt), resolve()), ms);
      this.halt.signal.addEventListener('abort', onHalt, { once: true });
    });
  }
}
