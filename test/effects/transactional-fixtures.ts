import 'reflect-metadata';
import { ContainerModule, inject, injectable, type ServiceIdentifier } from 'inversify';
import { Column, Entity, PrimaryGeneratedColumn } from 'typeorm';
import {
  Agent,
  Pipeline,
  SideEffect,
  Step,
  TOKENS,
  currentOperation,
  currentTransaction,
  guardedExecute,
  type ActiveOperation,
  type Logger,
  type StepContext,
} from '../../src/index';
import { book, type LedgerDb } from './ledger';

/**
 * Pipelines and services of the transactional-effects tests. What each test varies goes through the
 * `knobs` hooks (reset before every test), so one set of decorated classes serves every scenario.
 */

export const silent: Logger = { debug() {}, info() {}, warn() {}, error() {} };

export const LEDGER: ServiceIdentifier<LedgerDb> = Symbol.for('test:effects:ledger');

export interface Knobs {
  /** In the step, before its first effect. */
  beforeEffects?: (ctx: StepContext) => Promise<void> | void;
  /** In the transactional effect, after its writes; may throw (the effect fails) or return (or resolve to) another result. */
  insideEffect?: (op: ActiveOperation, call: number) => unknown;
  /** In the step, after its effects; may throw (the step attempt fails). */
  afterEffects?: (ctx: StepContext) => Promise<void> | void;
  /** Calls of the transactional effect, all attempts and processes' runs in this test included. */
  calls: number;
}

export const knobs: Knobs = { calls: 0 };

export function resetKnobs(): void {
  for (const key of Object.keys(knobs) as (keyof Knobs)[]) delete knobs[key];
  knobs.calls = 0;
}

export interface Booking {
  item: string;
  amount: number;
  key: string;
}

@injectable()
export class Books {
  constructor(@inject(LEDGER) private readonly db: LedgerDb) {}

  /** Books an amount in the application's ledger, in the step's transaction. */
  @SideEffect({ name: 'book', transactional: true, retries: { maxAttempts: 2, initialDelayMs: 1, jitter: false } })
  async book(item: string, amount: number): Promise<Booking> {
    const op = currentOperation();
    knobs.calls += 1;
    await book(this.db, currentTransaction(), { run_id: op.runId, op_key: op.key, item, amount });
    const replaced = await knobs.insideEffect?.(op, knobs.calls);
    return (replaced as Booking | undefined) ?? { item, amount, key: op.key };
  }

  /** Not transactional: an outside write (here it only answers), recorded on its own. */
  @SideEffect({ name: 'notify' })
  notify(item: string): Promise<string> {
    return Promise.resolve(`notified:${item}:${currentOperation().attempt}`);
  }

  /** Asks for the transaction although it is not transactional (its error surfaces as this effect's rejection). */
  @SideEffect({ name: 'misuse' })
  misuse(): Promise<void> {
    return new Promise((resolve) => resolve(void currentTransaction()));
  }
}

@injectable()
export class Bookkeeper extends Agent {
  constructor(@inject(Books) private readonly books: Books) {
    super();
  }

  @Step({ retries: { maxAttempts: 2, initialDelayMs: 1, jitter: false } })
  async record(ctx: StepContext) {
    await knobs.beforeEffects?.(ctx);
    const first = await this.books.book('apples', 10);
    const second = await this.books.book('pears', 5);
    await knobs.afterEffects?.(ctx);
    return { booked: [first, second] };
  }
}

@Pipeline({ name: 'bookkeeping', version: '1.0.0', agents: [Bookkeeper] })
export class Bookkeeping {}

/** A non-transactional effect after a transactional one in the same step. */
@injectable()
export class MixedAgent extends Agent {
  constructor(@inject(Books) private readonly books: Books) {
    super();
  }

  @Step()
  async mixed() {
    const booked = await this.books.book('plums', 3);
    const notice = await this.books.notify('plums');
    await knobs.afterEffects?.({} as StepContext);
    return { booked, notice };
  }
}

@Pipeline({ name: 'mixed', version: '1.0.0', agents: [MixedAgent] })
export class Mixed {}

/** The plain-function form: `guardedExecute(key, fn, { transactional: true })`. */
@injectable()
export class PlainAgent extends Agent {
  constructor(@inject(LEDGER) private readonly db: LedgerDb) {
    super();
  }

  @Step()
  async plain(ctx: StepContext) {
    const booked = await guardedExecute(
      'book-cherries',
      async () => {
        const op = currentOperation();
        await book(this.db, currentTransaction(), { run_id: ctx.runId, op_key: op.key, item: 'cherries', amount: 7 });
        return { key: op.key };
      },
      { transactional: true },
    );
    await knobs.afterEffects?.(ctx);
    return { booked };
  }
}

@Pipeline({ name: 'plain', version: '1.0.0', agents: [PlainAgent] })
export class Plain {}

/** Calls `currentTransaction()` from a non-transactional effect. */
@injectable()
export class MisuseAgent extends Agent {
  constructor(@inject(Books) private readonly books: Books) {
    super();
  }

  @Step()
  async misuse() {
    await this.books.misuse();
    return {};
  }
}

@Pipeline({ name: 'misuse', version: '1.0.0', agents: [MisuseAgent] })
export class Misuse {}

/** Binds the ledger, the services and a silent logger. */
export function effectsModule(ledger: LedgerDb): ContainerModule {
  return new ContainerModule(({ bind }) => {
    bind(LEDGER).toConstantValue(ledger);
    bind(Books).toSelf().inSingletonScope();
    bind(TOKENS.Logger).toConstantValue(silent);
  });
}

/** A step with a short timeout around a transactional effect. */
@injectable()
export class HastyAgent extends Agent {
  constructor(@inject(Books) private readonly books: Books) {
    super();
  }

  @Step({ timeoutMs: 150 })
  async hasty() {
    return { booked: await this.books.book('figs', 1) };
  }
}

@Pipeline({ name: 'hasty', version: '1.0.0', agents: [HastyAgent] })
export class Hasty {}

/** Three steps without side effects: plain hot-path checkpoints. */
export class Tally extends Agent {
  @Step() one() {
    return { one: 1 };
  }
  @Step() two() {
    return { two: 2 };
  }
  @Step() three() {
    return { three: 3 };
  }
}

@Pipeline({ name: 'tally', version: '1.0.0', agents: [Tally] })
export class Tallying {}

/** The ledger table as a TypeORM entity (registered with the store through its `entities` option). */
@Entity('ledger')
export class LedgerEntry {
  @PrimaryGeneratedColumn()
  id!: number;
  @Column('text')
  run_id!: string;
  @Column('text')
  op_key!: string;
  @Column('text')
  item!: string;
  @Column('integer')
  amount!: number;
}

/** Writes through the transaction's EntityManager with an entity, not SQL text. */
@injectable()
export class EntityWriter extends Agent {
  @SideEffect({ name: 'enter', transactional: true })
  async enter(item: string): Promise<{ key: string }> {
    const op = currentOperation();
    await currentTransaction().insert(LedgerEntry, { run_id: op.runId, op_key: op.key, item, amount: 1 });
    return { key: op.key };
  }

  @Step({ retries: { maxAttempts: 2, initialDelayMs: 1, jitter: false } })
  async write(ctx: StepContext) {
    const entered = await this.enter('entity');
    await knobs.afterEffects?.(ctx);
    return { entered };
  }
}

@Pipeline({ name: 'entities', version: '1.0.0', agents: [EntityWriter] })
export class Entities {}
