// The outside world of the kit's test pipelines: a mail outbox, a bank and a warehouse that deduplicate by
// the idempotency key they are given (as real providers do), and a ticket system that does not.

/** An external system that keeps one record per idempotency key. */
export class KeyedSystem<T> {
  readonly byKey = new Map<string, T>();
  /** Calls, duplicates included. */
  calls = 0;

  write(key: string, value: T): void {
    this.calls += 1;
    if (!this.byKey.has(key)) this.byKey.set(key, value);
  }

  get count(): number {
    return this.byKey.size;
  }
}

export const world = {
  outbox: new KeyedSystem<string>(),
  bank: new KeyedSystem<number>(),
  warehouse: new KeyedSystem<string>(),
  tickets: new KeyedSystem<string>(),
};

/** The observe functions crashTest reads before and after every run. */
export const observeWorld = {
  emails: () => world.outbox.count,
  charges: () => world.bank.count,
  shipments: () => world.warehouse.count,
  tickets: () => world.tickets.count,
};

/** A Date.now() that moves by a millisecond at each call, so a key built from it differs between two executions however fast they are. */
export function steppingNow(): () => void {
  const real = Date.now;
  let t = real();
  Date.now = () => ++t;
  return () => {
    Date.now = real;
  };
}
