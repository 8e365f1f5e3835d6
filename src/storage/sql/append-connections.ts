import type { Pool, PoolClient, QueryConfig, QueryResult, QueryResultRow } from 'pg';

/** A pooled connection kept between appends, and since when it waits for the next one. */
interface Held {
  client: PoolClient;
  since: number;
  released: boolean;
  onError: (error: Error) => void;
}

/**
 * The connections step appends run on. Checking a connection out of `pg`'s pool and back for every
 * statement (`pool.query`: acquire and release events, an idle timer armed and cleared, error listeners
 * added and removed) cost about as much node CPU as the rest of the append, so up to `keep` connections
 * stay checked out between appends and the next append takes one of them directly.
 *
 * They are never kept from anyone else for long: a connection goes back to the pool at once when
 * something waits for one there, when `keep` are already kept, or after `idleMs` without an append, and
 * `keep` leaves at least one connection of the pool to the other statements. A statement that fails
 * hands its connection back with the error, which closes it, as `pool.query` does; a kept connection
 * that errors while idle is closed the same way.
 *
 * @example
 * const appends = new AppendConnections(pool, 2);
 * const res = await appends.query({ name, text, values });
 * appends.close(); // before pool.end()
 */
export class AppendConnections {
  private readonly idle: Held[] = [];
  private timer: NodeJS.Timeout | null = null;
  private closed = false;

  constructor(
    private readonly pool: Pool,
    private readonly keep: number,
    private readonly idleMs = 50,
  ) {}

  /** Connections kept now (checked out of the pool, waiting for an append). */
  get kept(): number {
    return this.idle.length;
  }

  async query<R extends QueryResultRow>(config: QueryConfig): Promise<QueryResult<R>> {
    if (this.keep < 1) return this.pool.query<R>(config);
    const held = this.idle.pop() ?? (await this.checkOut());
    let result: QueryResult<R>;
    try {
      result = await held.client.query<R>(config);
    } catch (error) {
      // plain Error: a thrown non-Error made an Error for the waiting appends, which rethrow it typed.
      this.release(held, error instanceof Error ? error : new Error(String(error)));
      throw error;
    }
    this.putBack(held);
    return result;
  }

  /** Hands every kept connection back to the pool; later appends use the pool. Call before `pool.end()`. */
  close(): void {
    this.closed = true;
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    for (const held of this.idle.splice(0)) this.release(held);
  }

  private async checkOut(): Promise<Held> {
    const client = await this.pool.connect();
    const held: Held = { client, since: 0, released: false, onError: (error) => this.drop(held, error) };
    // A checked-out client has no pool listener: without one, a connection error while it is kept would be unhandled.
    client.on('error', held.onError);
    return held;
  }

  private putBack(held: Held): void {
    if (this.closed || this.idle.length >= this.keep || this.pool.waitingCount > 0) return this.release(held);
    held.since = performance.now();
    this.idle.push(held);
    this.timer ??= this.arm();
  }

  /** One timer for all kept connections: it hands back those idle for `idleMs`, and re-arms while some remain. */
  private arm(): NodeJS.Timeout {
    const timer = setTimeout(() => {
      this.timer = null;
      const now = performance.now();
      for (let i = this.idle.length - 1; i >= 0; i--) {
        const held = this.idle[i];
        if (now - held.since >= this.idleMs) {
          this.idle.splice(i, 1);
          this.release(held);
        }
      }
      if (this.idle.length > 0) this.timer = this.arm();
    }, this.idleMs);
    timer.unref();
    return timer;
  }

  private drop(held: Held, error: Error): void {
    const at = this.idle.indexOf(held);
    if (at >= 0) this.idle.splice(at, 1);
    this.release(held, error);
  }

  private release(held: Held, error?: Error): void {
    if (held.released) return;
    held.released = true;
    held.client.removeListener('error', held.onError);
    held.client.release(error);
  }
}
