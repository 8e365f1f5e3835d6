/**
 * The CheckpointerTestInitializers LangGraph's conformance suite (@langchain/langgraph-checkpoint-validation)
 * runs against: one per backend, each checkpointer on storage of its own (a fresh SQLite file, a fresh
 * PostgreSQL schema, a fresh Redis key prefix), removed again when the suite destroys it. Compiled with
 * the rest of the tests and loaded by the vitest spec files (langgraph-validation-*.vitest.ts) through
 * `require`, so the suite exercises the compiled saver.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { Redis } from 'ioredis';
import { WaypointCheckpointSaver } from '../../src/integrations/langgraph';
import { TypeOrmCheckpointStore } from '../../src/storage/sql/typeorm-store';
import { PG_TEST_URL, dropSchema, schemaFor } from '../helpers/pg-schema';

/** The shape of @langchain/langgraph-checkpoint-validation's CheckpointerTestInitializer. */
export interface SaverTestInitializer {
  checkpointerName: string;
  beforeAll?(): Promise<void>;
  afterAll?(): Promise<void>;
  createCheckpointer(): Promise<WaypointCheckpointSaver>;
  destroyCheckpointer(saver: WaypointCheckpointSaver): Promise<void>;
}

export type ValidationBackend = 'sqlite' | 'postgres' | 'redis';

const REDIS_URL = process.env.WAYPOINT_TEST_REDIS_URL ?? 'redis://127.0.0.1:6379';

function sqlite(): SaverTestInitializer {
  let dir = '';
  let count = 0;
  const stores = new Map<WaypointCheckpointSaver, { store: TypeOrmCheckpointStore; file: string }>();
  return {
    checkpointerName: 'WaypointCheckpointSaver (SQLite)',
    beforeAll() {
      dir = mkdtempSync(path.join(tmpdir(), 'waypoint-lg-validation-'));
      return Promise.resolve();
    },
    afterAll() {
      rmSync(dir, { recursive: true, force: true });
      return Promise.resolve();
    },
    async createCheckpointer() {
      const file = path.join(dir, `saver-${++count}.db`);
      const store = new TypeOrmCheckpointStore({ type: 'sqlite', path: file });
      await store.init();
      const saver = new WaypointCheckpointSaver({ store });
      stores.set(saver, { store, file });
      return saver;
    },
    async destroyCheckpointer(saver) {
      const { store, file } = stores.get(saver)!;
      stores.delete(saver);
      await saver.close();
      await store.close();
      for (const suffix of ['', '-wal', '-shm']) rmSync(file + suffix, { force: true });
    },
  };
}

function postgres(): SaverTestInitializer {
  let count = 0;
  const stores = new Map<WaypointCheckpointSaver, { store: TypeOrmCheckpointStore; schema: string }>();
  return {
    checkpointerName: 'WaypointCheckpointSaver (PostgreSQL)',
    async createCheckpointer() {
      // Named per process and position: test runs in parallel (other dist dirs) never share a schema.
      const schema = schemaFor(`langgraph-validation postgres ${process.pid} ${++count}`);
      await dropSchema(schema);
      const store = new TypeOrmCheckpointStore({ type: 'postgres', url: PG_TEST_URL, schema, poolSize: 4 });
      await store.init();
      const saver = new WaypointCheckpointSaver({ store });
      stores.set(saver, { store, schema });
      return saver;
    },
    async destroyCheckpointer(saver) {
      const { store, schema } = stores.get(saver)!;
      stores.delete(saver);
      await saver.close();
      await store.close();
      await dropSchema(schema);
    },
  };
}

function redis(): SaverTestInitializer {
  let count = 0;
  const prefixes = new Map<WaypointCheckpointSaver, string>();
  return {
    checkpointerName: 'WaypointCheckpointSaver (Redis)',
    createCheckpointer() {
      const keyPrefix = `wpt:lg-validation:${process.pid}:${++count}:`;
      const saver = new WaypointCheckpointSaver({ redis: { url: REDIS_URL, keyPrefix } });
      prefixes.set(saver, keyPrefix);
      return Promise.resolve(saver);
    },
    async destroyCheckpointer(saver) {
      const keyPrefix = prefixes.get(saver)!;
      prefixes.delete(saver);
      // Cleaning up through the saver's own API also checks that deleteThread leaves nothing behind.
      for (let threads = await saver.listThreads(); threads.length > 0; threads = await saver.listThreads()) {
        for (const t of threads) await saver.deleteThread(t.threadId);
      }
      await saver.close();
      const leftovers = await scanKeys(keyPrefix);
      if (leftovers.length > 0) throw new Error(`deleteThread left keys behind under '${keyPrefix}': ${leftovers.slice(0, 5).join(', ')}`);
    },
  };
}

/** Test-only check (SCAN is fine here, never in the saver): the keys under a prefix. */
async function scanKeys(prefix: string): Promise<string[]> {
  const client = new Redis(REDIS_URL);
  try {
    const keys: string[] = [];
    let cursor = '0';
    do {
      const [next, batch] = await client.scan(cursor, 'MATCH', `${prefix.replace(/[*?[\]\\]/g, '\\$&')}*`, 'COUNT', 1000);
      keys.push(...batch);
      cursor = next;
    } while (cursor !== '0');
    return keys;
  } finally {
    client.disconnect();
  }
}

export const initializers: Record<ValidationBackend, SaverTestInitializer> = { sqlite: sqlite(), postgres: postgres(), redis: redis() };
