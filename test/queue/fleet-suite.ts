import 'reflect-metadata';
import { strict as assert } from 'node:assert';
import { after, describe, it } from 'node:test';
import { resolve } from 'node:path';
import { Client, Pool } from 'pg';
import { Waypoint, postgresStorage } from '../../src/index';
import { enqueue } from '../../src/queue/index';
import { inPool } from '../crash/harness';
import { killLiveChildren, spawnNode, waitFor, waitForLine, type ChildExit } from '../helpers/child-process';
import { CompletionWatch, describeRecovery, observeDeath, recoveryOf, type WorkerDeath } from './fleet-kills';
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

/** Workers of the fleet test that die by SIGKILL (the test's, or their own at a fault point). */
const KILLED = new Set(['w-killed', 'w-dequeue', 'w-ack']);

/**
 * Three real worker processes drain 100 queued runs of the six-step fleet pipeline while one is SIGKILLed
 * and another SIGTERMed mid-run; two more workers kill themselves at the fleet fault points (after
 * dequeueing a job before leasing its run, and after a run's last step before acking its job) while they
 * hold other runs mid-step. Checked from the records: every run completed, every step row once and in
 * order, the charge made once per run, and no run ever executed by two workers at the same time. The
 * recovery time of each death (until the last run it held completed elsewhere) is printed.
 */
export function defineFleetSuite(backend: QueueBackend): void {
  describe(`fleet on ${backend.name}`, () => {
    after(() => killLiveChildren());

    it('3 workers, 100 runs, one SIGKILLed and one SIGTERMed mid-run, two more killed at the fleet fault points: every run completes once', { timeout: 120_000 }, async (t) => {
      const started = Date.now();
      const schema = schemaFor(`fleet: ${backend.name}`);
      await dropSchema(schema);
      const queue: QueueFixture = await backend.open(`fleet: ${backend.name}`, { expireMs: 3_000, checkMs: 1_000, retryDelayMs: 200 });
      const db = new Client({ connectionString: PG_TEST_URL });
      await db.connect();
      const pool = new Pool({ connectionString: PG_TEST_URL, max: 2 });
      const waypoint = await Waypoint.create({ modules: [postgresStorage({ url: PG_TEST_URL, schema }), queue.module()] });
      const watch = new CompletionWatch(pool, schema);
      try {
        await db.query(fleetTablesSql(schema));
        const runIds = Array.from({ length: RUNS }, (_, i) => `fleet-${String(i).padStart(3, '0')}`);
        await inPool(runIds, 8, async (runId) => {
          const result = await enqueue(waypoint, FleetPipeline, { runId, input: { customer: `c-${runId}`, amount: 1 + Number(runId.slice(-3)) } });
          assert.equal(result.enqueued, true);
        });

        const spawnWorker = (id: string, fault?: string) =>
          spawnNode(WORKER, [], {
            ...queue.env,
            FLEET_PG_URL: PG_TEST_URL,
            FLEET_STORE_SCHEMA: schema,
            FLEET_WORKER_ID: id,
            FLEET_CONCURRENCY: '4',
            FLEET_STEP_MS: '25',
            FLEET_LEASE_TTL_MS: '2000',
            FLEET_POLL_MS: '100',
            // The sweep, not the queue's expiry, recovers a job stuck with a worker that died before leasing its run.
            FLEET_SWEEP_MS: '1000',
            FLEET_STUCK_MS: '2000',
            WAYPOINT_FAULT: fault,
            WAYPOINT_LOG_LEVEL: 'error',
          });
        const workers = { killed: spawnWorker('w-killed'), termed: spawnWorker('w-termed'), survivor: spawnWorker('w-survivor') };
        // Each dies at its fault point on a later hit, so it holds other runs (mid-step, or fetched) as it dies.
        const faulty = { dequeue: spawnWorker('w-dequeue', 'after-dequeue-before-lease@6'), ack: spawnWorker('w-ack', 'after-last-step-before-ack@3') };
        for (const child of [...Object.values(workers), ...Object.values(faulty)]) await waitForLine(child, /"event":"ready"/, 30_000);
        const deaths: Promise<WorkerDeath>[] = [
          observeDeath(faulty.dequeue, 'w-dequeue', 'after-dequeue-before-lease@6', pool, schema),
          observeDeath(faulty.ack, 'w-ack', 'after-last-step-before-ack@3', pool, schema),
          observeDeath(workers.killed, 'w-killed', 'SIGKILL mid-step', pool, schema),
        ];
        watch.start();

        const completed = async () => Number((await db.query<{ count: string }>(`SELECT count(*) FROM "${schema}".waypoint_runs WHERE status = 'completed'`)).rows[0].count);
        const midRun = async (worker: string) =>
          Number(
            (await db.query<{ count: string }>(`SELECT count(*) FROM "${schema}".fleet_step_log WHERE worker = $1 AND ended_at IS NULL AND step IN ('s2', 's3', 's4')`, [worker]))
              .rows[0].count,
          ) > 0;
        const now = async () => (await db.query<{ now: Date }>('SELECT clock_timestamp() AS now')).rows[0].now;

        await waitFor(async () => (await completed()) >= 15 && (await midRun('w-killed')), {
          what: 'w-killed to be mid-run after 15 completions',
          child: workers.killed,
          timeoutMs: 40_000,
          intervalMs: 20,
        });
        const killedAt = await now();
        const killExit = await workers.killed.kill('SIGKILL');
        t.diagnostic(`SIGKILL at ${Date.now() - started} ms with ${await completed()} runs completed`);
        assert.equal(killExit.signal, 'SIGKILL');

        await waitFor(async () => (await completed()) >= 35 && (await midRun('w-termed')), {
          what: 'w-termed to be mid-run after 35 completions',
          child: workers.termed,
          timeoutMs: 40_000,
          intervalMs: 20,
        });
        const termExit = await workers.termed.kill('SIGTERM');
        const termStats = stoppedStats(termExit);
        t.diagnostic(`SIGTERM stop at ${Date.now() - started} ms: ${JSON.stringify(termStats)}`);
        assert.equal(termExit.code, 0, `SIGTERMed worker exits cleanly: ${termExit.stderr}`);
        assert.ok(termStats.requeued >= 1, `SIGTERMed worker requeued its paused runs: ${JSON.stringify(termStats)}`);

        await waitFor(async () => (await completed()) === RUNS, { what: `all ${RUNS} runs to complete`, child: workers.survivor, timeoutMs: 60_000, intervalMs: 100 });
        t.diagnostic(`all runs completed at ${Date.now() - started} ms`);
        await watch.stop();
        // The watch polls every 100 ms: the last completions may have come after its last poll.
        await watch.poll();
        const dead = await Promise.all(deaths);
        for (const death of dead) {
          assert.equal(death.exit.signal, 'SIGKILL', `${death.worker} died by SIGKILL: ${death.exit.stderr.slice(-500)}`);
          assert.ok(death.held.length >= 1, `${death.worker} held runs when it died`);
          t.diagnostic(`${backend.name}: ${describeRecovery(recoveryOf(death, watch))}`);
        }
        const ack = dead.find((d) => d.worker === 'w-ack')!;
        assert.ok(ack.doneBeforeDeath.length >= 1, `w-ack died with a completed but unacknowledged run: ${JSON.stringify(ack.held)} / ${JSON.stringify(ack.doneBeforeDeath)}`);
        const lastExit = await workers.survivor.kill('SIGTERM');
        assert.equal(lastExit.code, 0, `survivor exits cleanly: ${lastExit.stderr}`);
        assert.deepEqual(settledFails([...dead.map((d) => d.exit), termExit, lastExit]), [], 'no job failed');
        const killedAtOf = new Map(dead.map((d) => [d.worker, d.worker === 'w-killed' ? killedAt : new Date(d.diedAt)]));

        await assertEveryRunOnce(waypoint, runIds);
        const log = (await db.query<LogRow>(`SELECT run_id, step, worker, started_at, ended_at FROM "${schema}".fleet_step_log ORDER BY started_at, id`)).rows;
        await assertChargedOnce(waypoint, db, schema, runIds, new Set(log.filter((r) => KILLED.has(r.worker)).map((r) => r.run_id)));
        assertOneExecutorAtATime(log, killedAtOf);
        const afterKill = assertRecoveredMidRun(log, 'w-killed');
        const afterTerm = assertRecoveredMidRun(log, 'w-termed');
        t.diagnostic(`runs resumed by another worker: ${afterKill} after the SIGKILL, ${afterTerm} after the SIGTERM; ${log.length} step executions logged`);
        // Only a step the SIGKILL interrupted may have run twice, and never twice to completion by one worker.
        for (const [runId, rows] of groupBy(log, (r) => r.run_id)) {
          for (const [step, execs] of groupBy(rows, (r) => r.step)) {
            const finished = execs.filter((r) => r.ended_at !== null);
            const interrupted = execs.filter((r) => r.ended_at === null);
            assert.ok(
              interrupted.every((r) => KILLED.has(r.worker)),
              `${runId}/${step}: only a killed worker left a step unfinished`,
            );
            assert.ok(finished.length === 1 || (finished.length === 2 && finished.some((r) => KILLED.has(r.worker))), `${runId}/${step} finished ${finished.length} times`);
          }
        }
      } finally {
        await watch.stop();
        await killLiveChildren();
        await waypoint.close();
        await queue.dispose();
        await db.end();
        await pool.end();
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

/** The `settled` lines of jobs failed back to the queue (each names its run and the error), to show when one is there. */
function settledFails(exits: ChildExit[]): { event: string; disposition?: string }[] {
  return exits.flatMap(events).filter((l) => l.event === 'settled' && l.disposition === 'fail');
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
    assert.deepEqual(
      rows.map((r) => r.sequence),
      keys.map((_, i) => i + 1),
      `${runId}: sequences 1..${keys.length}`,
    );
    assert.deepEqual(
      rows.map((r) => `${r.agentId}/${r.stepName}`),
      keys,
      `${runId}: each step recorded once, in order`,
    );
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
  assert.ok(
    effects.every((e) => e.n === '1'),
    'no run charged twice',
  );
  const calls = new Map(
    (await db.query<{ run_id: string; n: string }>(`SELECT run_id, count(*) AS n FROM "${schema}".fleet_effect_calls GROUP BY run_id`)).rows.map((r) => [r.run_id, Number(r.n)]),
  );
  for (const runId of runIds) {
    const ops = await waypoint.store.listOperations(runId);
    assert.deepEqual(
      ops.map((o) => [o.name, o.state]),
      [['charge', 'committed']],
      `${runId}: one committed charge operation`,
    );
    const made = calls.get(runId) ?? 0;
    const attempts = ops[0].attempts;
    if (touchedByKilled.has(runId)) {
      assert.ok(made >= 1 && made <= attempts && attempts <= 2, `${runId}: ${made} provider calls for ${attempts} guarded attempts`);
    } else {
      assert.deepEqual([made, attempts], [1, 1], `${runId}: charged by one guarded call`);
    }
  }
}

/** Per run, step executions never overlap: each starts after the previous one (any worker) ended. */
function assertOneExecutorAtATime(log: LogRow[], killedAt: Map<string, Date>): void {
  for (const [runId, rows] of groupBy(log, (r) => r.run_id)) {
    for (let i = 1; i < rows.length; i++) {
      const prev = rows[i - 1];
      const next = rows[i];
      // A killed worker's unfinished step ended, at the latest, when the SIGKILL was sent (or its exit seen).
      const prevEnd = prev.ended_at ?? killedAt.get(prev.worker) ?? null;
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
  const handedOver = [...groupBy(log, (r) => r.run_id).values()].filter((rows) => rows.some((r) => r.worker === worker) && rows[rows.length - 1].worker !== worker);
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
