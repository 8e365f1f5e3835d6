import { createHash } from 'node:crypto';
import IORedis from 'ioredis';
import { ContainerModule } from 'inversify';
import type { Logger } from '../../src/index';
import { BullMqRunQueue, PgBossRunQueue, RUN_QUEUE, type RunQueue } from '../../src/queue/index';
import { PG_TEST_URL, dropSchema } from '../helpers/pg-schema';

export const REDIS_TEST_URL = process.env.WAYPOINT_TEST_REDIS_URL ?? 'redis://127.0.0.1:6379';

/** Queue timings short enough for tests on a busy 2-core machine: redelivery within a few seconds. */
export interface QueueTuning {
  /** pg-boss expiry / BullMQ lock duration of a delivery, in ms. */
  expireMs: number;
  /** pg-boss maintenance / BullMQ stalled-check period, in ms. */
  checkMs: number;
  retryDelayMs: number;
}

export const FAST: QueueTuning = { expireMs: 2_000, checkMs: 1_000, retryDelayMs: 200 };

/** One isolated queue for one test, as the test process and its child workers reach it. */
export interface QueueFixture {
  kind: 'pg-boss' | 'bullmq';
  /** A new client of this test's queue (each process, each Waypoint has its own). */
  create(logger?: Logger): RunQueue;
  /** The same, as a container module binding `RUN_QUEUE`. */
  module(): ContainerModule;
  /** Environment for a child process: `queueFromEnv` rebuilds the same queue there. */
  env: Record<string, string>;
  dispose(): Promise<void>;
}

export interface QueueBackend {
  name: 'pg-boss' | 'bullmq';
  /** `tuning` 'defaults': the bindings' own defaults (pg-boss expiry 15 min, BullMQ lock 30 s, stall check 15 s). */
  open(testName: string, tuning?: QueueTuning | 'defaults'): Promise<QueueFixture>;
}

/** pg-boss in its own schema per test (named from the test, dropped before and after). */
export const pgBossBackend: QueueBackend = {
  name: 'pg-boss',
  async open(testName, tuning = FAST) {
    const schema = `wpq_${hash(testName)}`;
    await dropSchema(schema);
    const env = { FLEET_QUEUE: 'pg-boss', FLEET_QUEUE_URL: PG_TEST_URL, FLEET_QUEUE_SCHEMA: schema, ...tuningEnv(tuning) };
    return fixture('pg-boss', env, () => dropSchema(schema));
  },
};

/** BullMQ under its own key prefix per test (keys deleted by SCAN, never FLUSHALL). */
export const bullmqBackend: QueueBackend = {
  name: 'bullmq',
  async open(testName, tuning = FAST) {
    const prefix = `wpq-${hash(testName)}`;
    await deleteKeys(prefix);
    const env = { FLEET_QUEUE: 'bullmq', FLEET_QUEUE_URL: REDIS_TEST_URL, FLEET_QUEUE_PREFIX: prefix, ...tuningEnv(tuning) };
    return fixture('bullmq', env, () => deleteKeys(prefix));
  },
};

export const QUEUE_BACKENDS: QueueBackend[] = [pgBossBackend, bullmqBackend];

/**
 * Builds the queue the environment describes (FLEET_QUEUE = pg-boss | bullmq, FLEET_QUEUE_URL,
 * FLEET_QUEUE_SCHEMA / FLEET_QUEUE_PREFIX, FLEET_EXPIRE_MS, FLEET_CHECK_MS, FLEET_RETRY_DELAY_MS). A timing
 * variable that is not set leaves the binding's own default.
 */
export function queueFromEnv(env: NodeJS.ProcessEnv, logger?: Logger): RunQueue {
  const ms = (name: string) => (env[name] === undefined ? undefined : Number(env[name]));
  const expireMs = ms('FLEET_EXPIRE_MS');
  const checkMs = ms('FLEET_CHECK_MS');
  const retryDelayMs = ms('FLEET_RETRY_DELAY_MS');
  const secs = (value: number | undefined, min: number) => (value === undefined ? undefined : Math.max(min, Math.round(value / 1000)));
  if (env.FLEET_QUEUE === 'bullmq') {
    return new BullMqRunQueue({ url: env.FLEET_QUEUE_URL!, prefix: env.FLEET_QUEUE_PREFIX, lockDurationMs: expireMs, stalledIntervalMs: checkMs, retryDelayMs, logger });
  }
  if (env.FLEET_QUEUE === 'pg-boss') {
    return new PgBossRunQueue({
      url: env.FLEET_QUEUE_URL!,
      schema: env.FLEET_QUEUE_SCHEMA,
      expireInSeconds: secs(expireMs, 1),
      maintenanceIntervalSeconds: secs(checkMs, 1),
      retryDelaySeconds: secs(retryDelayMs, 0),
      logger,
    });
  }
  throw new Error(`FLEET_QUEUE must be pg-boss or bullmq, got ${String(env.FLEET_QUEUE)}`);
}

function fixture(kind: 'pg-boss' | 'bullmq', env: Record<string, string>, drop: () => Promise<void>): QueueFixture {
  const created: RunQueue[] = [];
  const create = (logger?: Logger) => {
    const queue = queueFromEnv(env, logger);
    created.push(queue);
    return queue;
  };
  return {
    kind,
    env,
    create,
    module: () => {
      const queue = create();
      return new ContainerModule(({ bind }) => {
        bind(RUN_QUEUE).toConstantValue(queue);
      });
    },
    async dispose() {
      await Promise.all(created.map((q) => q.close()));
      await drop();
    },
  };
}

function tuningEnv(tuning: QueueTuning | 'defaults'): Record<string, string> {
  if (tuning === 'defaults') return {};
  return { FLEET_EXPIRE_MS: String(tuning.expireMs), FLEET_CHECK_MS: String(tuning.checkMs), FLEET_RETRY_DELAY_MS: String(tuning.retryDelayMs) };
}

function hash(text: string): string {
  return createHash('sha256').update(text).digest('hex').slice(0, 20);
}

async function deleteKeys(prefix: string): Promise<void> {
  const redis = new IORedis(REDIS_TEST_URL, { maxRetriesPerRequest: 1 });
  try {
    let cursor = '0';
    do {
      const [next, keys] = await redis.scan(cursor, 'MATCH', `${prefix}:*`, 'COUNT', 500);
      cursor = next;
      if (keys.length > 0) await redis.del(...keys);
    } while (cursor !== '0');
  } finally {
    redis.disconnect();
  }
}
