import { WaypointError } from '../contract/errors';

/**
 * The database and queue client packages, loaded on first use instead of when Waypoint is imported, and
 * installed by the user who needs them (optional peer dependencies). A user on the embedded SQLite store
 * never loads pg, ioredis, pg-boss or BullMQ; each loads the first time a store, queue or command that
 * needs it is constructed, or fails then with `MISSING_DEPENDENCY` saying what to install.
 *
 * Types come from `import type` at the call sites, which costs nothing at run time.
 *
 * @example
 * const { Redis } = ioredis();
 * const client = new Redis(url, { lazyConnect: true });
 */

/** The `ioredis` package (Redis store, tiered store, BullMQ queue, LangGraph on Redis). */
export function ioredis(): typeof import('ioredis') {
  return load('ioredis', 'the Redis and tiered stores and the BullMQ queue') as typeof import('ioredis');
}

/** The `pg` package (PostgreSQL store, pg-boss queue, the CLI on PostgreSQL). */
export function pg(): typeof import('pg') {
  return load('pg', 'the PostgreSQL and tiered stores and the pg-boss queue') as typeof import('pg');
}

/** The `pg-boss` package's constructor. */
export function pgBoss(): typeof import('pg-boss') {
  return load('pg-boss', 'the pg-boss queue (pgBossQueue)') as typeof import('pg-boss');
}

/** The `bullmq` package. */
export function bullmq(): typeof import('bullmq') {
  return load('bullmq', 'the BullMQ queue (bullmqQueue)') as typeof import('bullmq');
}

function load(name: string, usedBy: string): unknown {
  try {
    // eslint-disable-next-line @typescript-eslint/no-require-imports -- optional peers are loaded lazily, on first use, by a name chosen at run time
    return require(name) as unknown;
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'MODULE_NOT_FOUND' && String((error as Error).message).includes(`'${name}'`)) {
      throw new WaypointError('MISSING_DEPENDENCY', `The '${name}' package is not installed; ${usedBy} need it. Install it next to Waypoint: npm install ${name}`);
    }
    throw error;
  }
}
