/**
 * Mutual exclusion for SQLite's one connection: a step's transaction holds the gate from BEGIN to
 * COMMIT / ROLLBACK, and every other call of the store waits while it is held (`busy`), since on a
 * single connection it would otherwise run inside that transaction. Transactions are served in arrival
 * order; `busy` resolves only when no transaction holds or waits for the gate.
 *
 * @example
 * const release = await gate.acquire();
 * try { ... } finally { release(); }
 * for (let b = gate.busy; b; b = gate.busy) await b;   // wait until no transaction is open
 */
export class ConnectionGate {
  private held: Promise<void> | null = null;
  private free: (() => void) | null = null;
  private readonly waiting: (() => void)[] = [];

  /** Pending while the gate is held; null when it is free. */
  get busy(): Promise<void> | null {
    return this.held;
  }

  /** Waits for the gate, takes it, and returns the function that gives it back (idempotent). */
  async acquire(): Promise<() => void> {
    // Handed over by the previous holder: `held` stays pending across the handover.
    if (this.held) await new Promise<void>((resolve) => this.waiting.push(resolve));
    else this.held = new Promise<void>((resolve) => (this.free = resolve));
    let released = false;
    return () => {
      if (released) return;
      released = true;
      const next = this.waiting.shift();
      if (next) return next();
      const free = this.free!;
      this.held = null;
      this.free = null;
      free();
    };
  }
}
