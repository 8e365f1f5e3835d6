import 'reflect-metadata';
import { strict as assert } from 'node:assert';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import type { ContainerModule } from 'inversify';
import { Client } from 'pg';
import { Waypoint, postgresStorage, sqliteStorage, type RunResult } from '../../src/index';
import { lastJsonLine, spawnNode, waitFor, type ChildExit, type ChildHandle } from '../helpers/child-process';
import { PG_TEST_URL, dropSchema, schemaFor } from '../helpers/pg-schema';
import { readExecLog, type ExecEvent, type LifecycleConfig } from './pipeline';
import { WORKER_ENV, type WorkerConfig } from './worker-config';
import BetterSqlite3 from 'better-sqlite3';

/** The compiled worker, next to this file in whatever dist dir the tests were built into. */
const WORKER = resolve(__dirname, 'worker.js');

/** Exit code of a paused or waiting run under runUntilSignal (EX_TEMPFAIL). */
export const PAUSED_EXIT = 75;

/** The database's own write lock held by the test, so a worker's next write blocks inside the store. */
export interface RunLock {
  /** Sessions currently blocked on the lock (PostgreSQL), or null when the backend cannot tell (SQLite). */
  blockedWriters(): Promise<number | null>;
  /** Frees the lock and waits until the statements it held back have finished. */
  release(): Promise<void>;
}

/** One isolated database for one test. */
export interface LifecycleDb {
  store: WorkerConfig['store'];
  storage(): ContainerModule;
  lockRun(runId: string): Promise<RunLock>;
  dispose(): Promise<void>;
}

export interface LifecycleBackend {
  name: string;
  open(testName: string, dir: string): Promise<LifecycleDb>;
}

/** What a worker printed last. */
export interface WorkerOutput {
  outcome: 'result' | 'cancelled' | 'signalled' | 'error';
  result?: RunResult;
  exitCode?: number;
  listeners?: { before: { SIGTERM: number; SIGINT: number }; after: { SIGTERM: number; SIGINT: number } };
  error?: { code: string | null; name: string; message: string };
  delivered?: boolean;
  /** The absolute deadline the worker used (epoch ms). */
  deadline?: number;
  info?: { status: string };
}

/** SQLite file in the test's temp dir; the lock is `BEGIN IMMEDIATE` on a connection of the test's own. */
export const sqliteBackend: LifecycleBackend = {
  name: 'SQLite',
  open(_testName, dir) {
    const path = join(dir, 'waypoint.db');
    return Promise.resolve({
      store: { sqlite: path },
      storage: () => sqliteStorage({ path }),
      lockRun() {
        // better-sqlite3 ships no types; this is the slice used here.
        const Database = BetterSqlite3 as new (file: string) => { exec(sql: string): void; close(): void };
        const db = new Database(path);
        db.exec('BEGIN IMMEDIATE');
        return Promise.resolve({
          blockedWriters: () => Promise.resolve(null),
          release: () => Promise.resolve((db.exec('ROLLBACK'), db.close())),
        });
      },
      dispose: async () => {},
    });
  },
};

/** A schema per test; the lock is `SELECT ... FOR UPDATE` of the run row in an open transaction. */
export const postgresBackend: LifecycleBackend = {
  name: 'PostgreSQL',
  async open(testName) {
    const schema = schemaFor(`lifecycle: ${testName}`);
    await dropSchema(schema);
    return {
      store: { pg: { url: PG_TEST_URL, schema } },
      storage: () => postgresStorage({ url: PG_TEST_URL, schema, poolSize: 2 }),
      async lockRun(runId) {
        const client = new Client({ connectionString: PG_TEST_URL });
        await client.connect();
        await client.query('BEGIN');
        await client.query(`SELECT 1 FROM "${schema}".waypoint_runs WHERE run_id = $1 FOR UPDATE`, [runId]);
        return {
          async blockedWriters() {
            const { rows } = await client.query<{ n: string }>(
              `SELECT count(*) AS n FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND pid <> pg_backend_pid() AND query LIKE $1`,
              [`%"${schema}"%`],
            );
            return Number(rows[0].n);
          },
          async release() {
            await client.query('ROLLBACK');
            // A blocked statement runs once the lock is free, even when its client is dead (PostgreSQL
            // notices the closed socket only when it answers). Wait for it, so what the test reads next
            // is final.
            const deadline = Date.now() + 10_000;
            while (Date.now() < deadline) {
              const { rows } = await client.query<{ n: string }>(
                `SELECT count(*) AS n FROM pg_stat_activity WHERE state = 'active' AND pid <> pg_backend_pid() AND query LIKE $1`,
                [`%"${schema}"%`],
              );
              if (Number(rows[0].n) === 0) break;
              await new Promise((resolve) => setTimeout(resolve, 10));
            }
            await client.end();
          },
        };
      },
      dispose: () => dropSchema(schema),
    };
  },
};

/**
 * One test's world: a temp dir with the execution log, an isolated database, workers spawned against
 * it, and a Waypoint in the test process that only reads what the workers wrote.
 */
export class LifecycleBench {
  readonly log: string;

  private constructor(
    readonly dir: string,
    readonly db: LifecycleDb,
    readonly reader: Waypoint,
  ) {
    this.log = join(dir, 'exec.jsonl');
  }

  static async open(backend: LifecycleBackend, testName: string): Promise<LifecycleBench> {
    const dir = mkdtempSync(join(tmpdir(), 'waypoint-lifecycle-'));
    const db = await backend.open(testName, dir);
    const reader = await Waypoint.create({ modules: [db.storage()] });
    return new LifecycleBench(dir, db, reader);
  }

  async close(): Promise<void> {
    await this.reader.close();
    await this.db.dispose();
    rmSync(this.dir, { recursive: true, force: true });
  }

  /**
   * Spawns a worker command. Defaults: a stable worker id per run (a restarted worker retakes its own
   * lease at once), a lease long enough that no heartbeat happens unless a test asks for one, a 5 s
   * grace period, and the runtime's warnings on stderr.
   */
  spawn(
    command: 'run' | 'cancel' | 'signal',
    runId: string,
    args: string[] = [],
    over: Partial<Omit<WorkerConfig, 'steps'>> & { steps?: Partial<LifecycleConfig> } = {},
  ): ChildHandle {
    const config: WorkerConfig = {
      store: this.db.store,
      workerId: `worker-${runId}`,
      leaseTtlMs: 60_000,
      gracePeriodMs: 5_000,
      ...over,
      steps: { log: this.log, mode: 'honour', ms: 20, ...over.steps },
    };
    return spawnNode(WORKER, [command, runId, ...args], { [WORKER_ENV]: JSON.stringify(config), WAYPOINT_LOG_LEVEL: 'warn', WAYPOINT_FAULT: undefined });
  }

  run(runId: string, over: Parameters<LifecycleBench['spawn']>[3] = {}): ChildHandle {
    return this.spawn('run', runId, [], over);
  }

  /** Waits for the child's exit and its JSON outcome. */
  async outcome(child: ChildHandle): Promise<{ exit: ChildExit; out: WorkerOutput }> {
    const exit = await child.exited;
    return { exit, out: lastJsonLine<WorkerOutput>(exit) };
  }

  /** Runs a worker to completion of the run and returns its result (exit 0 required). */
  async complete(runId: string, over: Parameters<LifecycleBench['spawn']>[3] = {}): Promise<{ result: RunResult; pid: number }> {
    const child = this.run(runId, over);
    const { exit, out } = await this.outcome(child);
    assert.equal(exit.code, 0, `worker for ${runId} did not complete: ${exit.stdout} ${exit.stderr}`);
    assert.equal(out.result?.status, 'completed');
    return { result: out.result, pid: child.pid };
  }

  events(): ExecEvent[] {
    return readExecLog(this.log);
  }

  /** Waits until `child` logged `event` for `step` and returns that event. */
  async waitForEvent(child: ChildHandle, step: string, event: ExecEvent['event']): Promise<ExecEvent> {
    const find = () => this.events().find((e) => e.pid === child.pid && e.step === step && e.event === event);
    await waitFor(() => find() !== undefined, { what: `${step} to log '${event}' in pid ${child.pid}`, child });
    return find()!;
  }

  /** Keys of the recorded step rows, in sequence order. */
  async recorded(runId: string): Promise<string[]> {
    const rows = await this.reader.store.listSteps(runId);
    assert.deepEqual(
      rows.map((r) => r.sequence),
      rows.map((_, i) => i + 1),
      'sequences 1..n without gaps',
    );
    return rows.map((r) => `${r.agentId}/${r.stepName}`);
  }

  /** Creates the gate file a `gate`-mode step waits for. */
  openGate(path: string): void {
    writeFileSync(path, 'open');
  }
}

/** Runs `fn` with a fresh bench, always closing it (and killing leftover children). */
export async function withBench(backend: LifecycleBackend, name: string, fn: (bench: LifecycleBench) => Promise<void>, kill: () => Promise<void>): Promise<void> {
  const bench = await LifecycleBench.open(backend, `${backend.name} ${name}`);
  try {
    await fn(bench);
  } finally {
    await kill();
    await bench.close();
  }
}
