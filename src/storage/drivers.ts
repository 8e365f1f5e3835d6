/**
 * The database and queue client packages, loaded on first use instead of when Waypoint is imported. A
 * user on the embedded SQLite store never loads pg, ioredis, pg-boss or BullMQ (together about 330
 * modules); each loads the first time a store, queue or command that needs it is constructed.
 *
 * Types come from `import type` at the call sites, which costs nothing at run time.
 *
 * @example
 * const { Redis } = ioredis();
 * const client = new Redis(url, { lazyConnect: true });
 */

/** The `ioredis` package. */
export function ioredis(): typeof import('ioredis') {
  return require('ioredis') as typeof import('ioredis');
}

/** The `pg` package. */
export function pg(): typeof import('pg') {
  return require('pg') as typeof import('pg');
}

/** The `pg-boss` package's constructor. */
export function pgBoss(): typeof import('pg-boss') {
  return require('pg-boss') as typeof import('pg-boss');
}

/** The `bullmq` package. */
export function bullmq(): typeof import('bullmq') {
  return require('bullmq') as typeof import('bullmq');
}
