import 'reflect-metadata';
import { strict as assert } from 'node:assert';
import { after, describe, it } from 'node:test';
import { resolve } from 'node:path';
import { Client, Pool } from 'pg';
import { Waypoint, postgresStorage } from '../../src/index';
import { enqueue } from '../../src/queue/index';
import { killLiveChildren, spawnNode, waitFor, waitForLine, type ChildExit } from '../helpers/child-process';
import { PG_TEST_URL, dropSchema, schemaFor } from '../helpers/pg-schema';
import { sleep } from '../helpers/store-records';
import { CompletionWatch, describeRecovery, observeDeath, recoveryOf, type WorkerDeath } from './fleet-kills';
import { FleetPipeline, fleetStepKeys, fleetTablesSql } from './fleet-pipeline';
import type { QueueBackend } from './queue-backends';

const WORKER = resolve(__dirname, 'fleet-worker-main.js');

/** The bound the README promises with the default timings: lease TTL (30 s) + sweep period (20 s), with margin. */
const BOUND_MS = 60_000;

/** One victim worker per point of a job's life at which a worker can die. */
const VICTIMS: { worker: string; how: string; fault?: string; stepMs?: number }[] = [
  { worker: 'v-dequeue', how: 'after-dequeue-before-lease', fault: 'after-dequeue-before-lease' },
  { worker: 'v-in-step', how: 'inside a step (before-effect, in s4)', fault: 'before-effect' },
  { worker: 'v-between', how: 'between steps (after-checkpoint-before-next-step@2)', fault: 'after-checkpoint-before-next-step@2' },
  { worker: 'v-before-ack', how: 'after-last-step-before-ack', fault: 'after-last-step-before-ack' },
  { worker: 'v-drain', how: 'during a SIGTERM drain (SIGKILL 500 ms after SIGTERM, mid-step)', stepMs: 3_000 },
];

/**
 * With the library's default timings (lease TTL 30 s, the worker's orphan sweep every 20 s, pg-boss
 * expiry 15 min, BullMQ lock 30 s / stall check 15 s), a worker process killed at each point of a job's
 * life: its run is completed by another worker within 60 s, every step recorded once, the charge made once.
 *
 * Every worker's lease owner id has another host's shape, so nothing on this host can see that a worker
 * died: its runs are freed by lease expiry, as between hosts. The survivors start only after the last
 * victim died, so each time below includes a worker start-up: it overstates the recovery, never understates it.
 */
export function defineRecoverySuite(backend: QueueBackend): void {
  describe(`recovery of a dead worker's runs on ${backend.name}, default timings`, () => {
    after(() => killLiveChildren());

    it("a worker killed at each point of a job's life: its run completes on another worker within 60 s", { timeout: 180_000 }, async (t) => {
      const schema = schemaFor(`recovery: ${backend.name}`);
      await dropSchema(schema);
      const queue = await backend.open(`recovery: ${backend.name}`, 'defaults');
      const db = new Client({ connectionString: PG_TEST_URL });
      await db.connect();
      const pool = new Pool({ connectionString: PG_TEST_URL, max: 2 });
      const waypoint = await Waypoint.create({ modules: [postgresStorage({ url: PG_TEST_URL, schema }), queue.module()] });
      const watch = new CompletionWatch(pool, schema);
      try {
        await db.query(fleetTablesSql(schema));
        const spawnWorker = (worker: string, extra: Record<string, string | undefined>) =>
          spawnNode(WORKER, [], {
            ...queue.env,
            FLEET_PG_URL: PG_TEST_URL,
            FLEET_STORE_SCHEMA: schema,
            FLEET_WORKER_ID: worker,
            FLEET_DEFAULTS: '1',
            FLEET_FOREIGN_OWNER: '1',
            FLEET_STEP_MS: '25',
            WAYPOINT_FAULT: undefined,
            WAYPOINT_LOG_LEVEL: 'error',
            ...extra,
          });

        // Victims only, one slot each: every victim takes exactly one of the runs and dies with it.
        const victims = VICTIMS.map((v) => ({ ...v, child: spawnWorker(v.worker, { FLEET_CONCURRENCY: '1', WAYPOINT_FAULT: v.fault, FLEET_STEP_MS: String(v.stepMs ?? 25) }) }));
        for (const v of victims) await waitForLine(v.child, /"event":"ready"/, 30_000);
        const deaths: Promise<WorkerDeath>[] = victims.map((v) => observeDeath(v.child, v.worker, v.how, pool, schema));
        const runIds = VICTIMS.map((_, i) => `recover-${i}`);
        for (const runId of runIds) await enqueue(waypoint, FleetPipeline, { runId, input: { customer: runId, amount: 7 } });

        const drain = victims.find((v) => v.worker === 'v-drain')!;
        await waitFor(async () => (await db.query(`SELECT 1 FROM "${schema}".fleet_step_log WHERE worker = 'v-drain' AND step = 's2' AND ended_at IS NULL`)).rowCount === 1, {
          what: 'v-drain to be inside s2',
          child: drain.child,
          timeoutMs: 30_000,
          intervalMs: 20,
        });
        drain.child.process.kill('SIGTERM');
        await sleep(500);
        assert.equal(drain.child.exitedYet(), false, 'v-drain is still draining (its step runs for 3 s)');
        void drain.child.kill('SIGKILL');

        const dead = await Promise.all(deaths);
        for (const death of dead) {
          assert.equal(death.exit.signal, 'SIGKILL', `${death.worker} died by SIGKILL: ${death.exit.stderr.slice(-500)}`);
          assert.equal(death.held.length, 1, `${death.worker} held one run: ${death.exit.stdout.slice(-500)}`);
        }
        assert.deepEqual(dead.flatMap((d) => d.held).sort(), [...runIds].sort(), 'each run was held by one victim');
        const beforeAck = dead.find((d) => d.worker === 'v-before-ack')!;
        assert.deepEqual(beforeAck.doneBeforeDeath, beforeAck.held, 'the run was complete when its worker died before the ack');
        for (const death of dead.filter((d) => d !== beforeAck)) assert.deepEqual(death.doneBeforeDeath, [], `${death.worker}'s run was not complete`);

        watch.start();
        const survivors = ['s-one', 's-two'].map((worker) => spawnWorker(worker, { FLEET_CONCURRENCY: '4' }));
        t.diagnostic(`survivors started ${Date.now() - Math.min(...dead.map((d) => d.diedAt))} ms after the first victim died`);
        await waitFor(() => runIds.every((r) => watch.seen.has(r)), { what: 'every run to complete', timeoutMs: BOUND_MS + 30_000, intervalMs: 200 }).catch(
          async (error: Error) => {
            const pending = dead.filter((d) => d.held.some((r) => !watch.seen.has(r)));
            const rows = (await db.query(`SELECT run_id, status, lease_owner, lease_expires_at FROM "${schema}".waypoint_runs WHERE status <> 'completed'`)).rows;
            throw new Error(`${error.message}; not recovered: ${pending.map((d) => d.how).join('; ')}; runs: ${JSON.stringify(rows)}`);
          },
        );
        await watch.stop();

        const recoveries = dead.map((death) => recoveryOf(death, watch));
        for (const r of recoveries) t.diagnostic(`${backend.name}: ${describeRecovery(r)}`);
        for (const r of recoveries) assert.ok(r.maxMs <= BOUND_MS, `${describeRecovery(r)}: over ${BOUND_MS} ms`);

        const exits: ChildExit[] = [];
        for (const child of survivors) exits.push(await child.kill('SIGTERM'));
        for (const exit of exits) assert.equal(exit.code, 0, `survivor exits cleanly: ${exit.stderr.slice(-500)}`);
        const settled = exits.flatMap((e) => e.lines).filter((l) => l.includes('"event":"settled"'));
        assert.ok(!settled.some((l) => l.includes('"disposition":"fail"')), `no job failed: ${settled.join('\n')}`);

        await assertEveryStepOnce(waypoint, db, schema, runIds);
        const lastWorker = async (runId: string) =>
          (await db.query<{ worker: string }>(`SELECT worker FROM "${schema}".fleet_step_log WHERE run_id = $1 ORDER BY id DESC LIMIT 1`, [runId])).rows[0]?.worker;
        for (const death of dead.filter((d) => d !== beforeAck)) {
          assert.match((await lastWorker(death.held[0])) ?? '', /^s-/, `${death.worker}'s run was finished by a survivor`);
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

/**
 * Every run completed, each step recorded once in order and finished exactly once over all workers (a
 * victim's interrupted step shows as one unfinished execution), and the charge made once.
 */
async function assertEveryStepOnce(waypoint: Waypoint, db: Client, schema: string, runIds: string[]): Promise<void> {
  const keys = fleetStepKeys();
  for (const runId of runIds) {
    assert.equal((await waypoint.get(runId))?.status, 'completed', `${runId} completed`);
    const rows = await waypoint.store.listSteps(runId);
    assert.deepEqual(
      rows.map((r) => `${r.agentId}/${r.stepName}`),
      keys,
      `${runId}: each step recorded once, in order`,
    );
    const finished = (
      await db.query<{ step: string; n: string }>(
        `SELECT step, count(*) AS n FROM "${schema}".fleet_step_log WHERE run_id = $1 AND ended_at IS NOT NULL GROUP BY step ORDER BY step`,
        [runId],
      )
    ).rows;
    assert.deepEqual(
      finished.map((r) => [r.step, Number(r.n)]),
      ['s1', 's2', 's3', 's4', 's5', 's6'].map((s) => [s, 1]),
      `${runId}: every step executed to its end once`,
    );
    const charged = await db.query(`SELECT 1 FROM "${schema}".fleet_effects WHERE run_id = $1`, [runId]);
    assert.equal(charged.rowCount, 1, `${runId} charged once`);
  }
}
