import type { DataSource } from 'typeorm';

/**
 * A TypeORM DataSource on a connection (SQLite) or pool (PostgreSQL) the store opened itself with the raw
 * driver, created only when something needs it: a migration, `entities`, `store.dataSource` or a
 * transactional side effect. TypeORM's driver is handed the open connection, so the hot path, the
 * DataSource and the step transactions share it. Each dialect says how to build the DataSource, how to
 * hand it the open connection, and how to close that connection when TypeORM never took it.
 */
export abstract class AdoptedDataSource {
  protected dataSource: DataSource | null = null;

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
    this.adopt(dataSource);
    Object.assign(dataSource, { isInitialized: true });
    this.dataSource = dataSource;
    return dataSource;
  }

  /** Closes the connection: through TypeORM when it was loaded (it holds the connection too), else directly. */
  async close(): Promise<void> {
    const dataSource = this.dataSource;
    this.dataSource = null;
    if (dataSource?.isInitialized) await dataSource.destroy();
    await this.closeConnection();
  }

  /** The DataSource's options on the open connection (not yet initialized). */
  protected abstract build(): DataSource;
  /** Sets on the DataSource's driver what its `connect()` would have set: the open connection and what it learnt. */
  protected abstract adopt(dataSource: DataSource): void;
  /** Closes the connection if it is still open (TypeORM's `destroy` may have closed it). */
  protected abstract closeConnection(): Promise<void> | void;
}
