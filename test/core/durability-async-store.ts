import { ContainerModule, Container } from 'inversify';
import { TOKENS, type CheckpointStore, type StepAppend, type StepRecord } from '../../src/index';

/**
 * A real store (memory, SQLite, PostgreSQL, Redis) whose step appends pass a gate the test sets: the gate
 * sees the rows of a write before they go to the store and may hold them (resolve later) or fail them
 * (reject: nothing of that write reaches the store). What landed is kept in order, with each write's size.
 */
export class HeldAppends {
  /** Rows the store committed, in the order their writes resolved. */
  readonly landed: StepRecord[] = [];
  /** Rows per write (1 for appendStep; appendRun batches rows that became ready together). */
  readonly writes: number[] = [];
  gate: (rows: readonly StepRecord[]) => Promise<void> = () => Promise.resolve();
  /** Called once a write's rows are committed. */
  onLanded: (rows: readonly StepRecord[]) => void = () => {};

  /** Step names of the landed rows (system rows, such as decisions, included under their own names). */
  names(): string[] {
    return this.landed.map((row) => row.stepName);
  }

  reset(): void {
    this.landed.length = 0;
    this.writes.length = 0;
    this.gate = () => Promise.resolve();
    this.onLanded = () => {};
  }

  private async write(appends: readonly StepAppend[], commit: () => Promise<void>): Promise<void> {
    const rows = appends.map((append) => append.step);
    this.writes.push(rows.length);
    await this.gate(rows);
    await commit();
    this.landed.push(...rows);
    this.onLanded(rows);
  }

  /** `inner`, with its appends gated. */
  wrap(inner: CheckpointStore): CheckpointStore {
    return new Proxy(inner, {
      get: (target, property) => {
        if (property === 'appendStep') return (append: StepAppend) => this.write([append], () => target.appendStep(append));
        if (property === 'appendRun') return (appends: readonly StepAppend[]) => this.write(appends, () => target.appendRun(appends));
        const value = Reflect.get(target, property, target) as unknown;
        return typeof value === 'function' ? (value as (...args: unknown[]) => unknown).bind(target) : value;
      },
    });
  }
}

/** The store a storage module binds, resolved on its own, as a module binding `held`'s wrapper of it. */
export async function heldModule(storage: ContainerModule, held: HeldAppends): Promise<{ module: ContainerModule; inner: CheckpointStore }> {
  const container = new Container();
  await container.loadAsync(storage);
  const inner = container.get<CheckpointStore>(TOKENS.CheckpointStore);
  const wrapped = held.wrap(inner);
  return { inner, module: new ContainerModule(({ bind }) => void bind(TOKENS.CheckpointStore).toConstantValue(wrapped)) };
}

/** A promise and its resolve function. */
export function deferred(): { promise: Promise<void>; resolve: () => void } {
  let resolve!: () => void;
  const promise = new Promise<void>((r) => (resolve = r));
  return { promise, resolve };
}

/** Resolves when `promise` does or after `ms` (a guard that turns a hang into a failing assertion; nothing is timed). */
export function orAfter(promise: Promise<void>, ms: number): Promise<void> {
  return new Promise<void>((resolve) => {
    const timer = setTimeout(resolve, ms);
    void promise.then(() => {
      clearTimeout(timer);
      resolve();
    });
  });
}
