import 'reflect-metadata';
import { strict as assert } from 'node:assert';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import type { ContainerModule } from 'inversify';
import { Waypoint, postgresStorage, sqliteStorage, type RunResult } from '../../src/index';
import { isZombie } from '../../src/core/lease/run-lease';
import { EXAMPLE_WORKER, lastJsonLine, spawnNode, spawnUnreaped, waitFor } from '../helpers/child-process';
import { PG_TEST_URL, dropSchema, schemaFor } from '../helpers/pg-schema';

interface Backend {
  name: string;
  open(dir: string): Promise<{ env: Record<string, string | undefined>; storage: () => ContainerModule; dispose: () => Promise<void> }>;
}

const BACKENDS: Backend[] = [
  {
    name: 'SQLite',
    open(dir) {
      const path = join(dir, 'waypoint.db');
      return Promise.resolve({ env: { WAYPOINT_DB: path, WAYPOINT_PG_URL: undefined }, storage: () => sqliteStorage({ path }), dispose: async () => {} });
    },
  },
  {
    name: 'PostgreSQL',
    async open() {
      const schema = schemaFor('fast restart after kill -9');
      await dropSchema(schema);
      return {
        env: { WAYPOINT_PG_URL: PG_TEST_URL, WAYPOINT_PG_SCHEMA: schema, WAYPOINT_DB: undefined },
        storage: () => postgresStorage({ url: PG_TEST_URL, schema }),
        dispose: () => dropSchema(schema),
      };
    },
  },
];

// A restart on the same host right after `kill -9` takes the run over at once: the dead worker still holds
// its lease (30 s by default), and until its parent reaps it the kernel keeps it as a zombie that
// kill(pid, 0) calls alive. The first worker runs under a parent that never reaps it (spawnUnreaped), so
// the zombie lasts through the restart as it does under a busy or careless parent.
for (const backend of BACKENDS) {
  describe(`${backend.name}: restart within 100 ms of a kill -9`, () => {
    const dir = mkdtempSync(join(tmpdir(), 'waypoint-fast-restart-'));
    after(() => rmSync(dir, { recursive: true, force: true }));

    it('takes the dead worker over (no RUN_LOCKED) and completes the run', async () => {
      const db = await backend.open(dir);
      const reader = await Waypoint.create({ modules: [db.storage()] });
      const runId = `fast-restart-${backend.name.toLowerCase()}`;
      const env = {
        ...process.env,
        ...db.env,
        WAYPOINT_WORKER_ID: undefined,
        WAYPOINT_LOG_LEVEL: 'error',
        WAYPOINT_LLM_DELAY_MS: '150',
        WAYPOINT_OUTBOX: join(dir, `outbox-${runId}.jsonl`),
        WAYPOINT_LLM_LOG: join(dir, `llm-${runId}.jsonl`),
      };
      for (const key of Object.keys(env)) if (env[key as keyof typeof env] === undefined) delete env[key as keyof typeof env];
      const { pid, parent: shell } = await spawnUnreaped(process.execPath, [EXAMPLE_WORKER, runId], { env });
      try {
        await waitFor(async () => (await reader.store.listSteps(runId).catch(() => [])).length >= 1, { what: 'the first step row', timeoutMs: 30_000 });
        const lease = await reader.store.getRun(runId);
        assert.match(lease?.leaseOwner ?? '', new RegExp(`:${pid}:`), 'the first worker holds the lease under its default id');

        process.kill(pid, 'SIGKILL');
        await waitFor(() => isZombie(pid), { what: 'the killed worker to be a zombie', intervalMs: 2, timeoutMs: 5_000 });
        const restart = spawnNode(EXAMPLE_WORKER, [runId], {
          ...db.env,
          WAYPOINT_WORKER_ID: undefined,
          WAYPOINT_LOG_LEVEL: 'error',
          WAYPOINT_LLM_DELAY_MS: '1',
          WAYPOINT_WAIT_FOR_LOCK_MS: '0',
          WAYPOINT_OUTBOX: env.WAYPOINT_OUTBOX,
          WAYPOINT_LLM_LOG: env.WAYPOINT_LLM_LOG,
        });
        const exit = await restart.exited;
        assert.equal(isZombie(pid), true, 'the dead worker was still unreaped when the restart took over');
        const result = lastJsonLine<RunResult & { error?: { code?: string } }>(exit);
        assert.equal(result.error?.code, undefined, `restart failed: ${JSON.stringify(result.error)}`);
        assert.equal(exit.code, 0);
        assert.equal(result.status, 'completed');
        assert.equal(result.resumed, true);
        assert.ok(result.stepsSkipped >= 1, 'the killed worker’s recorded steps were reused');
      } finally {
        shell.kill('SIGKILL');
        await reader.close();
        await db.dispose();
      }
    });
  });
}
