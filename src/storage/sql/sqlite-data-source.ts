import type { DataSource, DataSourceOptions } from 'typeorm';
import { typeorm } from '../drivers';
import { buildMigrations } from './migrations';
import type { ResolvedSqliteOptions } from './options';
import type { Tables } from './sql';
import type { Database } from './sqlite-driver';
import { AdoptedDataSource } from './adopted-data-source';

/**
 * The TypeORM DataSource on the store's one better-sqlite3 connection, created only when something needs
 * it. TypeORM's driver is handed the open handle (its `driver` option: a constructor that returns it), so
 * the DataSource, the hot path and the step transactions share one connection, as they always did.
 */
export class SqliteDataSource extends AdoptedDataSource {
  constructor(
    private readonly db: Database & { close(): void; readonly open: boolean },
    private readonly options: ResolvedSqliteOptions,
    private readonly tables: Tables,
  ) {
    super();
  }

  /** Hands TypeORM's driver the open better-sqlite3 handle. */
  protected adopt(dataSource: DataSource): void {
    (dataSource.driver as unknown as { databaseConnection: Database }).databaseConnection = this.db;
  }

  protected closeConnection(): void {
    if (this.db.open) this.db.close();
  }

  protected build(): DataSource {
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
