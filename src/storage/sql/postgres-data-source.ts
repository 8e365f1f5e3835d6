import type { Pool } from 'pg';
import type { DataSource, DataSourceOptions } from 'typeorm';
import { pg, typeorm } from '../drivers';
import { buildMigrations } from './migrations';
import type { ResolvedPostgresOptions } from './options';
import type { Tables } from './sql';
import { AdoptedDataSource } from './adopted-data-source';

/** What TypeORM's PostgreSQL driver learns when it connects (its `connect()`), read by the store's first query instead. */
export interface PgServerFacts {
  /** `version()` as TypeORM parses it: `16.4`. */
  version: string;
  database: string;
  /** `current_schema()`: where unqualified names resolve. */
  searchSchema: string;
}

/** The fields of TypeORM's PostgresDriver that `connect()` and `afterConnect()` set (public there, typed on the class). */
interface AdoptedDriver {
  master: Pool;
  version?: string;
  database?: string;
  searchSchema?: string;
  schema?: string;
  isGeneratedColumnsSupported: boolean;
}

/**
 * The store's `pg` Pool, opened with the raw driver (the options TypeORM's driver would give it), and the
 * TypeORM DataSource on that same pool, created only when something needs it: a migration, `entities`,
 * `store.dataSource` or a transactional side effect. TypeORM's driver is handed the open pool (its
 * `driver` option: a `Pool` constructor that returns it), so the hot path, the DataSource and the step
 * transactions share one pool, as they did when TypeORM created it.
 */
export class PostgresDataSource extends AdoptedDataSource {
  private facts: PgServerFacts | null = null;
  readonly pool: Pool;

  constructor(
    private readonly options: ResolvedPostgresOptions,
    private readonly tables: Tables,
  ) {
    super();
    this.pool = new (pg().Pool)({ connectionString: options.url, application_name: 'waypoint', max: options.poolSize });
    // An idle connection's error (the server restarted it) would otherwise crash the process; the pool
    // drops that connection and the next query opens another. TypeORM's handler (with logging off) did the same.
    this.pool.on('error', () => undefined);
  }

  /** Keeps what the store's first query learnt about the server, for `get()`. */
  remember(facts: PgServerFacts): void {
    this.facts = facts;
  }

  /** Hands TypeORM's driver the open pool and what the store's first query learnt about the server. */
  protected adopt(dataSource: DataSource): void {
    const facts = this.facts;
    // plain Error: an internal invariant (openPostgres remembers the facts before any caller can ask).
    if (!facts) throw new Error('the PostgreSQL store was opened without reading the server facts');
    const driver = dataSource.driver as unknown as AdoptedDriver;
    driver.master = this.pool;
    driver.version = facts.version;
    driver.database = facts.database;
    driver.searchSchema = facts.searchSchema;
    driver.schema ??= facts.searchSchema;
    driver.isGeneratedColumnsSupported = Number.parseFloat(facts.version) >= 12;
  }

  protected async closeConnection(): Promise<void> {
    if (!this.pool.ended) await this.pool.end();
  }

  protected build(): DataSource {
    const pool = this.pool;
    const tables = this.tables;
    const options: DataSourceOptions = {
      type: 'postgres',
      url: this.options.url,
      schema: this.options.schema,
      poolSize: this.options.poolSize,
      applicationName: 'waypoint',
      installExtensions: false,
      // The `pg` module TypeORM uses: a Pool "constructor" that returns the open pool (and no `native`, so
      // an installed pg-native does not swap it).
      driver: {
        Pool: function adopt() {
          return pool;
        },
      },
      entities: this.options.entities, // metadata for transactional side effects; never synchronized
      synchronize: false,
      migrationsRun: false,
      logging: false,
      migrations: buildMigrations('postgres', tables),
      migrationsTableName: tables.migrations,
      migrationsTransactionMode: 'all',
    };
    return new (typeorm().DataSource)(options);
  }
}
