import 'reflect-metadata';
import { strict as assert } from 'node:assert';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { ContainerModule } from 'inversify';
import { Client } from 'pg';
import { Agent, Pipeline, Step, postgresStorage, sqliteStorage, type Logger, type LogFields, type RunResult, type StepContext } from '../../src/index';
import type { Database } from '../../src/storage/sql/sqlite-driver';
import { EXAMPLE_WORKER, lastJsonLine, spawnNode } from '../helpers/child-process';
import { PG_TEST_URL, dropSchema, schemaFor } from '../helpers/pg-schema';
import BetterSqlite3 from 'better-sqlite3';

/** One isolated database the example worker (through env) and the test process (through a module) share. */
export interface UiDatabase {
  name: string;
  env: Record<string, string | undefined>;
  storage(): ContainerModule;
  /** Rewrites a stored step's output behind the store's back, so its digest no longer matches. */
  corrupt(runId: string, sequence: number): Promise<void>;
  dispose(): Promise<void>;
}

// better-sqlite3 ships no types; the store declares the slice it uses.
const Sqlite = BetterSqlite3 as new (path: string) => Database & { close(): void };

export function openSqlite(): Promise<UiDatabase> {
  const dir = mkdtempSync(join(tmpdir(), 'waypoint-ui-'));
  const path = join(dir, 'ui.db');
  return Promise.resolve({
    name: 'SQLite',
    env: { WAYPOINT_DB: path, WAYPOINT_PG_URL: undefined, WAYPOINT_OUTBOX: join(dir, 'outbox.jsonl') },
    storage: () => sqliteStorage({ path }),
    corrupt(runId, sequence) {
      const db = new Sqlite(path);
      try {
        db.prepare(`UPDATE waypoint_steps SET output = '{"tampered":true}' WHERE run_id = @runId AND sequence = @sequence`).run({ runId, sequence });
      } finally {
        db.close();
      }
      return Promise.resolve();
    },
    dispose() {
      rmSync(dir, { recursive: true, force: true });
      return Promise.resolve();
    },
  });
}

export async function openPostgres(label: string): Promise<UiDatabase> {
  const schema = schemaFor(`ui: ${label}`);
  const dir = mkdtempSync(join(tmpdir(), 'waypoint-ui-pg-'));
  await dropSchema(schema);
  return {
    name: 'PostgreSQL',
    env: { WAYPOINT_PG_URL: PG_TEST_URL, WAYPOINT_PG_SCHEMA: schema, WAYPOINT_DB: undefined, WAYPOINT_OUTBOX: join(dir, 'outbox.jsonl') },
    storage: () => postgresStorage({ url: PG_TEST_URL, schema }),
    async corrupt(runId, sequence) {
      const client = new Client({ connectionString: PG_TEST_URL });
      await client.connect();
      try {
        await client.query(`UPDATE "${schema}"."waypoint_steps" SET output = '{"tampered":true}' WHERE run_id = $1 AND sequence = $2`, [runId, sequence]);
      } finally {
        await client.end();
      }
    },
    async dispose() {
      await dropSchema(schema);
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** Runs the example financial-analysis worker for `runId` to its end; fails on an error line or a crash. */
export async function runWorker(db: UiDatabase, runId: string, extra: Record<string, string | undefined> = {}): Promise<RunResult> {
  const exit = await spawnNode(EXAMPLE_WORKER, [runId], workerEnv(db, runId, extra)).exited;
  const result = lastJsonLine<RunResult & { error?: unknown }>(exit);
  assert.equal(exit.code, 0, `worker for ${runId} failed: ${JSON.stringify(result.error ?? exit.stderr)}`);
  return result;
}

/**
 * The crashed-and-resumed run: a first worker kills itself (SIGKILL) right after checkpoint
 * `crashAfter`, a second worker (same worker id, as a restarted pod) resumes and completes it.
 */
export async function crashAndResume(db: UiDatabase, runId: string, crashAfter: number, extra: Record<string, string | undefined> = {}): Promise<RunResult> {
  const crash = await spawnNode(EXAMPLE_WORKER, [runId], workerEnv(db, runId, { ...extra, WAYPOINT_FAULT: `after-checkpoint-before-next-step@${crashAfter}` })).exited;
  assert.equal(crash.signal, 'SIGKILL', `the first worker for ${runId} should die of SIGKILL: ${crash.stdout} ${crash.stderr}`);
  const result = await runWorker(db, runId, extra);
  assert.equal(result.stepsSkipped, crashAfter);
  return result;
}

function workerEnv(db: UiDatabase, runId: string, extra: Record<string, string | undefined>): Record<string, string | undefined> {
  return {
    WAYPOINT_FAULT: undefined,
    WAYPOINT_LLM_HOLD: undefined,
    WAYPOINT_LLM_LOG: undefined,
    WAYPOINT_LOG_LEVEL: 'error',
    WAYPOINT_LLM_DELAY_MS: '5',
    WAYPOINT_WORKER_ID: `ui-worker-${runId}`,
    ...db.env,
    ...extra,
  };
}

/** `fetch` fails its first attempt in every session; `write` fails every attempt when the input asks for it. */
class FetchAgent extends Agent {
  @Step({ retries: { maxAttempts: 3, initialDelayMs: 5, jitter: false } })
  fetch(ctx: StepContext) {
    if (ctx.attempt === 1) return Promise.reject(new Error('upstream answered 503'));
    return { fetched: ctx.attempt };
  }

  @Step()
  parse() {
    return { parsed: true };
  }
}

class WriteAgent extends Agent {
  @Step({ retries: { maxAttempts: 2, initialDelayMs: 5, jitter: false } })
  write(ctx: StepContext<{ failWrite?: boolean }>) {
    if (ctx.state.failWrite) return Promise.reject(new Error('disk quota exceeded'));
    return { written: true };
  }
}

/** A small in-process pipeline with a retried step and, on request, a failing one. */
@Pipeline({ name: 'ui-flaky', version: '1.0.0', agents: [FetchAgent, WriteAgent] })
export class FlakyPipeline {}

/** A logger that keeps every record, to check what the UI server logs. */
export class CapturingLogger implements Logger {
  readonly records: { level: string; message: string; fields: LogFields }[] = [];
  debug(message: string, fields: LogFields = {}): void {
    this.records.push({ level: 'debug', message, fields });
  }
  info(message: string, fields: LogFields = {}): void {
    this.records.push({ level: 'info', message, fields });
  }
  warn(message: string, fields: LogFields = {}): void {
    this.records.push({ level: 'warn', message, fields });
  }
  error(message: string, fields: LogFields = {}): void {
    this.records.push({ level: 'error', message, fields });
  }
}

export const silentLogger: Logger = { debug() {}, info() {}, warn() {}, error() {} };

/** What JSON.stringify makes of a server view (src/ui/*-view.ts types): dates become ISO strings. */
export type Wire<T> = T extends Date ? string : T extends object ? { [K in keyof T]: Wire<T[K]> } : T;

/** The body of an error answer (src/ui/http-io.ts). */
export interface ErrorBody {
  error: { code: string; message: string };
}

/**
 * fetch() against the UI server, with the JSON body parsed and typed as the view `T` the route answers with
 * (text for an HTML page or an empty body): `http<RunDetailView>(ui.url, '/api/runs/r1')`.
 */
export async function http<T = unknown>(base: string, path: string, init: RequestInit = {}): Promise<{ status: number; body: Wire<T>; headers: Headers }> {
  const res = await fetch(new URL(path, base), { redirect: 'manual', ...init });
  const text = await res.text();
  let body: unknown = text;
  try {
    body = text ? JSON.parse(text) : null;
  } catch {
    // not JSON (HTML pages)
  }
  return { status: res.status, body: body as Wire<T>, headers: res.headers };
}

/** A JSON POST as the page sends it. */
export function postJson<T = unknown>(base: string, path: string, payload: unknown = {}, headers: Record<string, string> = {}) {
  return http<T>(base, path, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body: JSON.stringify(payload) });
}

export { PG_TEST_URL };
