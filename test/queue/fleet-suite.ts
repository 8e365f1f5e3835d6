import 'reflect-metadata';
import { strict as assert } from 'node:assert';
import { after, describe, it } from 'node:test';
import { resolve } from 'node:path';
import { Client } from 'pg';
import { Waypoint, postgresStorage } from '../../src/index';
import { enqueue } from '../../src/queue/index';
import { inPool } from '../crash/harness';
import { killLiveChildren, spawnNode, waitFor, waitForLine, type ChildExit } from '../helpers/child-process';
import { PG_TEST_URL, dropSchema, schemaFor } from '../helpers/pg-schema';
import { FleetPipeline, fleetStepKeys, fleetTablesSql } from './fleet-pipeline';
import type { QueueBackend, QueueFixture } from './queue-backends';

const WORKER = resolve(__dirname, 'fleet-worker-main.js');
const RUNS = 100;

interface LogRow {
  run_id: string;
  step: string;
  worker: string;
  started_at: Date;
  ended_at: Date | null;
}

/**
 * Three real worker processes drain 100 queued runs of the six-step fleet pipeline while one is SIGKILLed
 * and another SIGTERMed mid-run. Checked from the records: every run completed, every step row once and
 * in order, the charge made once per run, and no run ever executed by two workers at the same time.
 */
export function defineFleetSuite(backend: QueueBackend): void {
  describe(`fleet on ${backend.name}`, () => {
    after(() => killLiveChildren());

    it('3 workers, 100 runs, one SIGKILLed and one SIGTERMed mid-run: every run completes once', { timeout: 90_000 }, async (t) => {
      const started = Date.now();
      const schema = schemaFor(`fleet: ${backend.name}`);
      await dropSchema(schema);
      const queue: QueueFixture = await backend.open(`fleet: ${backend.name}`, { expireMs: 3_000, checkMs: 1_000, retryDelayMs: 200 });
      const db = new Client({ connectionString: PG_TEST_URL });
      await db.connect();
      const waypoint = await Waypoint.create({ modules: [postgresStorage({ url: PG_TEST_URL, schema }), queue.module()] });
      try {
        await db.query(fleetTablesSql(schema));
        const runIds = Array.from({ length: RUNS }, (_, i) => `fleet-${String(i).padStart(3, '0')}`);
        await inPool(runIds, 8, async (runId) => {
          const result = await enqueue(waypoint, FleetPipeline, { runId, input: { customer: `c-${runId}`, amount: 1 + Number(runId.slice(-3)) } });
          assert.equal(result.enqueued, true);
        });

        const spawnWorker = (id: string) =>
          spawnNode(WORKER, [], {
            ...queue.env,
            FLEET_PG_URL: PG_TEST_URL,
            FLEET_STORE_SCHEMA: schema,
            FLEET_WORKER_ID: id,
            FLEET_CONCURRENCY: '4',
            FLEET_STEP_MS: '25',
            FLEET_LEASE_TTL_MS: '2000',
            FLEET_POLL_MS: '100',
            FLEET_SWEEP_MS: '0', // recovery of the killed worker's runs is the queue's own job here
            WAYPOINT_LOG_LEVEL: 'error',
          });
        const workers = { killed: spawnWorker('w-killed'), termed: spawnWorker('w-termed'), survivor: spawnWorker('w-survivor') };
        for (const child of Object.values(workers)) await waitForLine(child, /"event":"ready"/, 30_000);

        const completed = async () => Number((await db.query(`SELECT count(*) FROM "${schema}".waypoint_runs WHERE status = 'completed'`)).rows[0].count);
        const midRun = async (worker: string) =>
          Number((await db.query(`SELECT count(*) FROM "${schema}".fleet_step_log WHERE worker = $1 AND ended_at IS NULL AND step IN ('s2', 's3', 's4')`, [worker])).rows[0].count) > 0;
        const now = async () => (await db.query<{ now: Date }>('SELECT clock_timestamp() AS now')).rows[0]!.now;

        await waitFor(async () => (await completed()) >= 15 && (await midRun('w-killed')), { what: 'w-killed to be mid-run after 15 completions', child: workers.killed, timeoutMs: 40_000, intervalMs: 20 });
        const killedAt = await now();
        const killExit = await workers.killed.kill('SIGKILL');
        t.diagnostic(`SIGKILL at ${Date.now() - started} ms with ${await completed()} runs completed`);
        assert.equal(killExit.signal, 'SIGKILL');

        await waitFor(async () => (await completed()) >= 35 && (await midRun('w-termed')), { what: 'w-termed to be mid-run after 35 completions', child: workers.termed, timeoutMs: 40_000, intervalMs: 20 });
        const termExit = await workers.termed.kill('SIGTERM');
        const termStats = stoppedStats(termExit);
        t.diagnostic(`SIGTERM stop at ${Date.now() - started} ms: ${JSON.stringify(termStats)}`);
        assert.equal(termExit.code, 0, `SIGTERMed worker exits cleanly: ${termExit.stderr}`);
        assert.ok(termStats.requeued >= 1, `SIGTERMed worker requeued its paused runs: ${JSON.stringify(termStats)}`);

        await waitFor(async () => (await completed()) === RUNS, { what: `all ${RUNS} runs to complete`, child: workers.survivor, timeoutMs: 60_000, intervalMs: 100 });
        t.diagnostic(`all runs completed at ${Date.now() - started} ms`);
        const lastExit = await workers.survivor.kill('SIGTERM');
        assert.equal(lastExit.code, 0, `survivor exits cleanly: ${lastExit.stderr}`);
        assert.equal(settledFails([killExit, termExit, lastExit]), 0, 'no job failed');

        await assertEveryRunOnce(waypoint, runIds);
        const log = (await db.query<LogRow>(`SELECT run_id, step, worker, started_at, ended_at FROM "${schema}".fleet_step_log ORDER BY started_at, id`)).rows;
        await assertChargedOnce(waypoint, db, schema, runIds, new Set(log.filter((r) => r.worker === 'w-killed').map((r) => r.run_id)));
        assertOneExecutorAtATime(log, killedAt);
        const afterKill = assertRecoveredMidRun(log, 'w-killed');
        const afterTerm = assertRecoveredMidRun(log, 'w-termed');
        t.diagnostic(`runs resumed by another worker: ${afterKill} after the SIGKILL, ${afterTerm} after the SIGTERM; ${log.length} step executions logged`);
        // Only a step the SIGKILL interrupted may have run twice, and never twice to completion by one worker.
        for (const [runId, rows] of groupBy(log, (r) => r.run_id)) {
          for (const [step, execs] of groupBy(rows, (r) => r.step)) {
            const finished = execs.filter((r) => r.ended_at !== null);
            const interrupted = execs.filter((r) => r.ended_at === null);
            assert.ok(interrupted.every((r) => r.worker === 'w-killed'), `${runId}/${step}: only the killed worker left a step unfinished`);
            assert.ok(finished.length === 1 || (finished.length === 2 && finished.some((r) => r.worker === 'w-killed')), `${runId}/${step} finished ${finished.length} times`);
          }
        }
      } finally {
        await killLiveChildren();
        await waypoint.close();
        await queue.dispose();
        await db.end();
        await dropSchema(schema);
      }
    });
  });
}

function stoppedStats(exit: ChildExit): { requeued: number; completed: number; failed: number } {
  const line = events(exit).find((l) => l.event === 'stopped') as { stats?: { requeued: number; completed: number; failed: number } } | undefined;
  assert.ok(line?.stats, `worker printed its stop line: ${exit.stdout.slice(-500)} ${exit.stderr.slice(-500)}`);
  return line.stats;
}

function settledFails(exits: ChildExit[]): number {
  return exits.flatMap(events).filter((l) => l.event === 'settled' && l.disposition === 'fail').length;
}

/** The JSON lines a worker printed (a SIGKILLed worker's last line may be cut short: skipped). */
function events(exit: ChildExit): { event: string; disposition?: string }[] {
  return exit.lines.flatMap((line) => {
    try {
      return [JSON.parse(line) as { event: string; disposition?: string }];
    } catch {
      return [];
    }
  });
}

/** Every run completed with its six steps recorded exactly once, in plan order. */
async function assertEveryRunOnce(waypoint: Waypoint, runIds: string[]): Promise<void> {
  const keys = fleetStepKeys();
  for (const runId of runIds) {
    const info = await waypoint.get(runId);
    assert.equal(info?.status, 'completed', `${runId} completed`);
    const rows = await waypoint.store.listSteps(runId);
    assert.deepEqual(rows.map((r) => r.sequence), keys.map((_, i) => i + 1), `${runId}: sequences 1..${keys.length}`);
    assert.deepEqual(rows.map((r) => `${r.agentId}/${r.stepName}`), keys, `${runId}: each step recorded once, in order`);
  }
}

/**
 * One charge per run in the provider's table, and every call the provider saw was a guarded attempt. Only a
 * run the SIGKILLed worker touched may show more: an attempt begun but killed before the call (attempts >
 * calls), or a call made but killed before its record (a second call with the same key, deduplicated).
 */
async function assertChargedOnce(waypoint: Waypoint, db: Client, schema: string, runIds: string[], touchedByKilled: Set<string>): Promise<void> {
  const effects = (await db.query<{ run_id: string; n: string }>(`SELECT run_id, count(*) AS n FROM "${schema}".fleet_effects GROUP BY run_id`)).rows;
  assert.equal(effects.length, runIds.length, 'every run charged');
  assert.ok(effects.every((e) => e.n === '1'), 'no run charged twice');
  const calls = new Map((await db.query<{ run_id: string; n: string }>(`SELECT run_id, count(*) AS n FROM "${schema}".fleet_effect_calls GROUP BY run_id`)).rows.map((r) => [r.run_id, Number(r.n)]));
  for (const runId of runIds) {
    const ops = await waypoint.store.listOperations(runId);
    assert.deepEqual(ops.map((o) => [o.name, o.state]), [['charge', 'committed']], `${runId}: one committed charge operation`);
    const made = calls.get(runId) ?? 0;
    const attempts = ops[0]!.attempts;
    if (touchedByKilled.has(runId)) {
      assert.ok(made >= 1 && made <= attempts && attempts <= 2, `${runId}: ${made} provider calls for ${attempts} guarded attempts`);
    } else {
      assert.deepEqual([made, attempts], [1, 1], `${runId}: charged by one guarded call`);
    }
  }
}

/** Per run, step executions never overlap: each starts after the previous one (any worker) ended. */
function assertOneExecutorAtATime(log: LogRow[], killedAt: Date): void {
  for (const [runId, rows] of groupBy(log, (r) => r.run_id)) {
    for (let i = 1; i < rows.length; i++) {
      const prev = rows[i - 1]!;
      const next = rows[i]!;
      // The killed worker's unfinished step ended, at the latest, when the SIGKILL was sent.
      const prevEnd = prev.ended_at ?? (prev.worker === 'w-killed' ? killedAt : null);
      assert.ok(prevEnd, `${runId}: ${prev.step} by ${prev.worker} never ended`);
      assert.ok(
        prevEnd.getTime() <= next.started_at.getTime(),
        `${runId}: ${next.step} by ${next.worker} started at ${next.started_at.toISOString()} before ${prev.step} by ${prev.worker} ended at ${prevEnd.toISOString()}`,
      );
    }
  }
}

/** Some run the worker was executing when it went away was finished by another worker (from its checkpoint). */
function assertRecoveredMidRun(log: LogRow[], worker: string): number {
  const handedOver = [...groupBy(log, (r) => r.run_id).values()].filter((rows) => rows.some((r) => r.worker === worker) && rows[rows.length - 1]!.worker !== worker);
  assert.ok(handedOver.length >= 1, `a run ${worker} was executing was resumed by another worker`);
  return handedOver.length;
}

function groupBy<T>(items: T[], key: (item: T) => string): Map<string, T[]> {
  const groups = new Map<string, T[]>();
  for (const item of items) {
    const k = key(item);
    const list = groups.get(k);
    if (list) list.push(item);
    else groups.set(k, [item]);
  }
  return groups;
}
