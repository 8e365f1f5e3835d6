import { existsSync } from 'node:fs';
import { resolve } from 'node:path';
import type { ContainerModule } from 'inversify';
import { pg } from '../storage/drivers';
import { postgresStorage, sqliteStorage } from '../storage/modules';
import { redisStorage } from '../storage/redis/module';
import { quoteIdent } from '../storage/sql/sql';
import { DEFAULT_TABLE_PREFIX } from '../storage/sql/options';
import { reasonOf } from '../contract/errors';
import { CliError, EXIT, usageError } from './exit-codes';

/** A checkpoint store named by a `--store` URL. */
export interface StoreTarget {
  backend: 'sqlite' | 'postgres' | 'redis';
  /** The URL with any password masked, for messages. */
  display: string;
  /** The container module that binds this store. */
  module(): ContainerModule;
  /**
   * False when the store has never been set up here (no SQLite file; no Waypoint tables in the
   * PostgreSQL schema), so read commands can refuse instead of creating an empty store by accident.
   */
  initialized(): Promise<boolean>;
}

const FORMS = 'sqlite:./path.db, sqlite:/abs/path.db, postgres://user@host:5432/db?schema=name, redis://host:6379?prefix=name';

/**
 * Parses a store URL: `sqlite:<path>` (relative to `cwd`; `sqlite:///abs` also accepted),
 * `postgres://` / `postgresql://` with an optional `?schema=` (other parameters go to the driver), and
 * `redis://` / `rediss://` with an optional `?prefix=` (key prefix, default `waypoint:`).
 *
 * @example
 * parseStoreUrl('postgres://app@db:5432/app?schema=waypoint').backend // 'postgres'
 */
export function parseStoreUrl(text: string, cwd = process.cwd()): StoreTarget {
  const scheme = /^([a-z]+):/i.exec(text)?.[1]?.toLowerCase();
  if (scheme === 'sqlite') return sqliteTarget(text.slice('sqlite:'.length), cwd);
  if (scheme === 'postgres' || scheme === 'postgresql') return postgresTarget(text);
  if (scheme === 'redis' || scheme === 'rediss') return redisTarget(text);
  throw usageError(`Unsupported store '${text}': use one of ${FORMS}.`);
}

function sqliteTarget(rest: string, cwd: string): StoreTarget {
  const raw = rest.startsWith('//') ? rest.slice(2) : rest;
  if (raw === '') throw usageError(`The sqlite store needs a file path (e.g. sqlite:./.waypoint/waypoint.db).`);
  const path = resolve(cwd, raw);
  return {
    backend: 'sqlite',
    display: `sqlite:${path}`,
    module: () => sqliteStorage({ path }),
    initialized: () => Promise.resolve(existsSync(path)),
  };
}

function postgresTarget(text: string): StoreTarget {
  const url = parseUrl(text);
  const schema = url.searchParams.get('schema') ?? undefined;
  url.searchParams.delete('schema');
  const connection = url.toString();
  const display = masked(text);
  return {
    backend: 'postgres',
    display,
    module: () => postgresStorage({ url: connection, schema }),
    initialized: async () => {
      const client = new (pg().Client)({ connectionString: connection, connectionTimeoutMillis: 10_000 });
      try {
        await client.connect();
        const table = `${schema ? `${quoteIdent(schema)}.` : ''}${quoteIdent(`${DEFAULT_TABLE_PREFIX}runs`)}`;
        const result = await client.query<{ found: string | null }>('SELECT to_regclass($1)::text AS found', [table]);
        return result.rows[0]?.found !== null;
      } catch (error) {
        throw new CliError(
          'STORE_UNAVAILABLE',
          `Cannot reach ${display}: ${reasonOf(error)}. Check that the store is running and that --store (or WAYPOINT_STORE) points at it.`,
          EXIT.STORE_UNAVAILABLE,
          { cause: error },
        );
      } finally {
        await client.end().catch(() => undefined);
      }
    },
  };
}

function redisTarget(text: string): StoreTarget {
  const url = parseUrl(text);
  const keyPrefix = url.searchParams.get('prefix') ?? undefined;
  url.searchParams.delete('prefix');
  const connection = url.toString();
  return {
    backend: 'redis',
    display: masked(text),
    module: () => redisStorage({ url: connection, keyPrefix }),
    // Redis has no schema: every key is created by the first write, and init() checks the server.
    initialized: () => Promise.resolve(true),
  };
}

function parseUrl(text: string): URL {
  try {
    return new URL(text);
  } catch (error) {
    throw usageError(`'${masked(text)}' is not a valid URL: use one of ${FORMS}.`, error);
  }
}

/** The URL with its password replaced by `***`. */
export function masked(text: string): string {
  try {
    const url = new URL(text);
    if (url.password) url.password = '***';
    return url.toString();
  } catch {
    return text.replace(/\/\/([^:/@]+):[^@/]*@/, '//$1:***@');
  }
}
