import type { DataSource, DataSourceOptions } from 'typeorm';
import { typeorm } from '../drivers';
import { buildMigrations } from './migrations';
import type { ResolvedSqliteOptions } from './options';
import type { Tables } from './sql';
import type { Database } from './sqlite-driver';

/**
 * The TypeORM DataSource on the store's one better-sqlite3 connection, created only when something needs
 * it. TypeORM's driver is handed the open handle (its `driver` option: a constructor that returns it), so
 * the DataSource, the hot path and the step transactions share one connection, as they always did.
 */
export class SqliteDataSource {
  private dataSource: DataSource | null = null;

  constructor(
    private readonly db: Database & { close(): void; readonly open: boolean },
    private readonly options: ResolvedSqliteOptions,
    private readonly tables: Tables,
  ) {}

  /** Whether TypeORM has been loaded for this store. */
  get loaded(): boolean {
    return this.dataSource !== null;
  }

  /** Builds and initializes the DataSource (entity metadata included): for migrations and `entities`. */
  async initialize(): Promise<DataSource> {
    if (this.dataSource?.isInitialized) return this.dataSource;
    const dataSource = this.build();
    await dataSource.initialize();
    this.dataSource = dataSource;
    return dataSource;
  }

  /**
   * The DataSource, built on first use without waiting: the connection is already open, so it is adopted
   * as TypeORM's `connect()` would have stored it. Only reached without `entities` (with them, init built
   * it), so there is no entity metadata to build.
   */
  get(): DataSource {
    if (this.dataSource) return this.dataSource;
    const dataSource = this.build();
    (dataSource.driver as unknown as { databaseConnection: Database }).databaseConnection = this.db;
    Object.assign(dataSource, { isInitialized: true });
    this.dataSource = dataSource;
    return dataSource;
  }

  /** Closes the connection (through TypeORM when it was loaded, as it holds the handle too). */
  async close(): Promise<void> {
    const dataSource = this.dataSource;
    this.dataSource = null;
    if (dataSource?.isInitialized) await dataSource.destroy();
    if (this.db.open) this.db.close();
  }

  private build(): DataSource {
    const db = this.db;
    const options: DataSourceOptions = {
      type: 'better-sqlite3',
      database: this.options.path,
      timeout: this.options.busyTimeoutMs,
      // A constructor that returns the open handle: `new driver(file, options)` gives TypeORM this connection.
      driver: function adopt() {
        return db;
      },
      entities: this.options.entities, // metadata for transactional side effects; never synchronized
      synchronize: false,
      migrationsRun: false,
      logging: false,
      migrations: buildMigrations('sqlite', this.tables),
      migrationsTableName: this.tables.migrations,
    };
    return new (typeorm().DataSource)(options);
  }
}
