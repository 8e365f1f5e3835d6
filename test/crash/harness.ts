import 'reflect-metadata';
import { strict as assert } from 'node:assert';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { ContainerModule } from 'inversify';
import { Waypoint, memoryStorage, type RunResult } from '../../src/index';
import { readCallLog } from '../../examples/financial-analysis/llm';
import { readOutbox } from '../../examples/financial-analysis/mailer';
import { DEMO_INPUT, FinancialAnalysis, exampleModule, stepKeys } from '../../examples/financial-analysis/pipeline';
import { EXAMPLE_WORKER, lastJsonLine, spawnNode, type ChildHandle, type ChildExit } from '../helpers/child-process';

/** One isolated database for one test, as the worker (env) and the test process (module) reach it. */
export interface TestDatabase {
  /** Environment that points the worker at this database (and away from any other backend). */
  env: Record<string, string | undefined>;
  storage(): ContainerModule;
  dispose(): Promise<void>;
}

/** A backend the crash suite runs against. */
export interface CrashBackend {
  name: string;
  open(testName: string, dir: string): Promise<TestDatabase>;
}

/** Everything one crash test works with: a temp dir, its database, and a Waypoint that reads it. */
export class CrashBench {
  readonly keys = stepKeys();
  readonly outbox: string;

  private constructor(
    readonly dir: string,
    readonly db: TestDatabase,
    /** Reads rows the children wrote; never runs a pipeline. */
    readonly reader: Waypoint,
  ) {
    this.outbox = join(dir, 'outbox.jsonl');
  }

  static async open(backend: CrashBackend, testName: string): Promise<CrashBench> {
    const dir = mkdtempSync(join(tmpdir(), 'waypoint-crash-'));
    const db = await backend.open(testName, dir);
    const reader = await Waypoint.create({ modules: [db.storage()] });
    return new CrashBench(dir, db, reader);
  }

  async close(): Promise<void> {
    await this.reader.close();
    await this.db.dispose();
    rmSync(this.dir, { recursive: true, force: true });
  }

  logPath(runId: string): string {
    return join(this.dir, `llm-${runId}.jsonl`);
  }

  /**
   * Spawns the example worker for `runId` against this bench's database, with a small LLM delay and a
   * stable worker id (a restarted pod keeps its identity, so it may retake its own lease at once).
   */
  spawn(runId: string, extra: Record<string, string | undefined> = {}): ChildHandle {
    return spawnNode(EXAMPLE_WORKER, [runId], {
      WAYPOINT_FAULT: undefined,
      WAYPOINT_LLM_HOLD: undefined,
      WAYPOINT_LOG_LEVEL: 'error',
      WAYPOINT_LLM_DELAY_MS: '5',
      WAYPOINT_LLM_LOG: this.logPath(runId),
      WAYPOINT_OUTBOX: this.outbox,
      WAYPOINT_WORKER_ID: `worker-${runId}`,
      ...this.db.env,
      ...extra,
    });
  }

  /** Runs a worker to its end and returns its RunResult; fails the test on an error line or a crash. */
  async complete(runId: string, extra: Record<string, string | undefined> = {}): Promise<RunResult> {
    const exit = await this.spawn(runId, extra).exited;
    const result = lastJsonLine<RunResult & { error?: unknown }>(exit);
    assert.equal(exit.code, 0, `worker for ${runId} failed: ${JSON.stringify(result.error ?? exit.stderr)}`);
    return result;
  }

  /** Asserts the child died of SIGKILL and that the store holds exactly `sequence` steps of the run. */
  async assertKilledAt(runId: string, exit: ChildExit, sequence: number): Promise<void> {
    assert.equal(exit.signal, 'SIGKILL', `expected ${runId}'s worker to die of SIGKILL, got code ${exit.code}: ${exit.stdout} ${exit.stderr}`);
    const info = await this.reader.get(runId);
    assert.ok(info, `run ${runId} was not created before the kill`);
    assert.equal(info.lastSequence, sequence, `run ${runId}: steps recorded when killed`);
  }

  /**
   * The full check of a recovered run: every step recorded exactly once, sequences 1..n without gaps
   * and in plan order; final state and agent memories equal to an uninterrupted run's; no LLM call of a
   * completed step repeated (only the interrupted steps' calls ran twice); the report delivered once.
   */
  async assertRecovered(runId: string, result: RunResult, expect: Recovery): Promise<void> {
    const total = this.keys.length;
    assert.equal(result.status, 'completed');
    assert.equal(result.lastSequence, total);

    const rows = await this.reader.store.listSteps(runId);
    assert.deepEqual(
      rows.map((r) => r.sequence),
      range(1, total),
      'sequences 1..n without gaps',
    );
    assert.deepEqual(
      rows.map((r) => `${r.agentId}/${r.stepName}`),
      this.keys,
      'each step recorded exactly once, in plan order',
    );
    assert.deepEqual(
      rows.map((r) => r.sideEffectsCommitted),
      this.keys.map((k) => k === 'ReportingAgent/deliverReport'),
      'side_effects_committed only on the sending step',
    );

    const baseline = await uninterrupted(runId);
    const checkpoint = await this.reader.checkpoint(runId);
    assert.equal(checkpoint.is_terminal, true);
    assert.deepEqual(checkpoint.shared_context, baseline.state, 'stored final state equals an uninterrupted run');
    assert.deepEqual(result.state, baseline.state, 'returned final state equals an uninterrupted run');
    assert.deepEqual(checkpoint.agent_memory_snapshots, baseline.memories, 'agent memories equal an uninterrupted run');

    const interrupted = new Map((expect.interrupted ?? []).map((i) => [i.tag, i]));
    const calls = readCallLog(this.logPath(runId));
    for (const tag of this.keys) {
      const starts = calls.filter((c) => c.tag === tag && c.event === 'start').length;
      const ends = calls.filter((c) => c.tag === tag && c.event === 'end').length;
      const hit = interrupted.get(tag);
      // A completed step's call ran once. An interrupted step's call ran again after the crash; it had
      // finished the first time only if the kill came after the call (between effect and checkpoint).
      assert.equal(starts, hit ? 2 : 1, `LLM calls started for ${tag}`);
      assert.equal(ends, hit?.callFinished ? 2 : 1, `LLM calls finished for ${tag}`);
    }

    const outbox = readOutbox(this.outbox).filter((e) => e.runId === runId);
    const delivered = outbox.filter((e) => e.status === 'delivered');
    assert.equal(delivered.length, 1, 'the report email is delivered exactly once');
    assert.equal(outbox.length - delivered.length, expect.deduplicatedSends ?? 0, 'repeated sends the provider deduplicated');
    assert.equal((checkpoint.shared_context.delivery as { messageId: string }).messageId, delivered[0].messageId);
    const operations = await this.reader.store.listOperations(runId);
    assert.deepEqual(
      operations.map((o) => ({ name: o.name, state: o.state, attempts: o.attempts })),
      [{ name: 'send-report', state: 'committed', attempts: expect.sendAttempts ?? 1 }],
      'one committed send-report operation',
    );
  }
}

/** What a recovered run is allowed to have repeated. */
export interface Recovery {
  /** Steps that were running when the process died; their LLM call runs again on resume. */
  interrupted?: { tag: string; callFinished: boolean }[];
  /** Times `send-report` was begun (1 unless the crash hit between begin and record). */
  sendAttempts?: number;
  /** Sends the provider saw twice with the same idempotency key. */
  deduplicatedSends?: number;
}

const baselines = new Map<string, Promise<{ state: unknown; memories: unknown }>>();

/** The same run id executed once, uninterrupted, in this process on the memory store (cached). */
export function uninterrupted(runId: string): Promise<{ state: unknown; memories: unknown }> {
  let cached = baselines.get(runId);
  if (!cached) {
    cached = (async () => {
      const dir = mkdtempSync(join(tmpdir(), 'waypoint-baseline-'));
      const waypoint = await Waypoint.create({ modules: [exampleModule({ llm: { delayMs: 0 }, outboxPath: join(dir, 'outbox.jsonl') }), memoryStorage()] });
      try {
        const result = await waypoint.run(FinancialAnalysis, { runId, input: { ...DEMO_INPUT } });
        const memories = (await waypoint.checkpoint(runId)).agent_memory_snapshots;
        return { state: JSON.parse(JSON.stringify(result.state)) as unknown, memories };
      } finally {
        await waypoint.close();
        rmSync(dir, { recursive: true, force: true });
      }
    })();
    baselines.set(runId, cached);
  }
  return cached;
}

/** Runs `fn` over `items` with at most `limit` in flight (the machine's cores bound useful parallelism). */
export async function inPool<T>(items: readonly T[], limit: number, fn: (item: T) => Promise<void>): Promise<void> {
  const queue = [...items];
  const workers = Array.from({ length: Math.min(limit, queue.length) }, async () => {
    for (let item = queue.shift(); item !== undefined; item = queue.shift()) {
      try {
        await fn(item);
      } catch (error) {
        // Stop the other workers from spawning more children while the test is being torn down.
        queue.length = 0;
        throw error;
      }
    }
  });
  await Promise.all(workers);
}

function range(from: number, to: number): number[] {
  return Array.from({ length: to - from + 1 }, (_, i) => from + i);
}
