import type { Pool } from 'pg';
import { StoreUnavailableError } from '../../contract/errors';
import type { DialectOps } from './ops';
import { PostgresOps } from './postgres-ops';

/** A `TypeOrmCheckpointStore`, as this file sees it (its module imports this one). */
interface SqlStore {
  readonly backend: 'sqlite' | 'postgres';
}

/** The open stores' operations (kept off the store class, so its public shape stays as it is). */
const opened = new WeakMap<SqlStore, DialectOps>();

/** Called by the store when `init()` has opened it. */
export function rememberOps(store: SqlStore, ops: DialectOps): void {
  opened.set(store, ops);
}

/** Called by the store when it closes. */
export function forgetOps(store: SqlStore): void {
  opened.delete(store);
}

/**
 * The `pg` Pool under a PostgreSQL store, after `init()`, without loading TypeORM (`pgPoolOf(store.dataSource)`
 * would): for statements of Waypoint's own on the same pool, such as the tiered store's.
 *
 * @example
 * await store.init();
 * const { rows } = await storePool(store).query('SELECT 1');
 */
export function storePool(store: SqlStore): Pool {
  const ops = opened.get(store);
  if (ops instanceof PostgresOps) return ops.pool;
  // plain Error: the cause clause of the typed STORE_UNAVAILABLE thrown here.
  const why = ops ? 'the store is not on PostgreSQL' : 'the store is not initialized (call init() first, or it was closed)';
  throw new StoreUnavailableError(store.backend, 'pool', new Error(why));
}
