import 'reflect-metadata';
import { appendFileSync, existsSync, readFileSync } from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';
import { ContainerModule, inject, injectable, type ServiceIdentifier } from 'inversify';
import {
  Agent,
  Pipeline,
  SideEffect,
  Step,
  currentOperation,
  currentTransaction,
  operationKey,
  type ReconcileContext,
  type ReconcileOutcome,
  type StepContext,
} from '../../src/index';
import { book, type LedgerTables } from '../effects/ledger';
import { requestJson } from '../helpers/http-counter';

/**
 * The crash harness's pipeline: six steps over three agents with every kind of side effect: transactional
 * inserts into the application's ledger (in the store's own database), external calls to an idempotent
 * HTTP API (the test's HttpCounter) carrying the operation key as Idempotency-Key, and an external call
 * with a reconcile hook that asks the API whether a call went through. `EFFECTS` lists them all, in the
 * order a fresh run executes them (which is the N of `WAYPOINT_FAULT=before-effect@N`).
 */

export type EffectKind = 'transactional' | 'external' | 'reconciled';

export interface PlannedEffect {
  agent: string;
  step: string;
  name: string;
  ordinal: number;
  kind: EffectKind;
  /** Transactional bookings: what is booked. */
  item?: string;
  amount?: number;
}

export const EFFECTS: readonly PlannedEffect[] = [
  { agent: 'Orders', step: 'reserve', name: 'book', ordinal: 1, kind: 'transactional', item: 'reserve-a', amount: 10 },
  { agent: 'Orders', step: 'reserve', name: 'book', ordinal: 2, kind: 'transactional', item: 'reserve-b', amount: 20 },
  { agent: 'Orders', step: 'notify', name: 'notify', ordinal: 1, kind: 'external' },
  { agent: 'Orders', step: 'notify', name: 'notify', ordinal: 2, kind: 'external' },
  { agent: 'Billing', step: 'charge', name: 'charge', ordinal: 1, kind: 'reconciled' },
  { agent: 'Billing', step: 'settle', name: 'notify', ordinal: 1, kind: 'external' },
  { agent: 'Billing', step: 'settle', name: 'book', ordinal: 1, kind: 'transactional', item: 'settle', amount: 30 },
  { agent: 'Reporting', step: 'record', name: 'book', ordinal: 1, kind: 'transactional', item: 'fee', amount: 1 },
  { agent: 'Reporting', step: 'record', name: 'book', ordinal: 2, kind: 'transactional', item: 'tax', amount: 2 },
];

/** Step keys in plan order. */
export const STEP_KEYS = ['Orders/reserve', 'Orders/notify', 'Billing/charge', 'Billing/settle', 'Reporting/record', 'Reporting/summarize'] as const;

export function effectKey(runId: string, effect: PlannedEffect): string {
  return operationKey(runId, effect.agent, effect.step, effect.name, effect.ordinal);
}

/** One line of a run's journal, written synchronously by the worker so a SIGKILL cannot lose it. */
export type JournalEvent =
  | { event: 'step'; step: string }
  | { event: 'checkpointed'; step: string }
  | { event: 'returned'; key: string }
  | { event: 'reconcile'; key: string; found: boolean }
  | { event: 'kill'; tick: number; label: string };

export type JournalLine = JournalEvent & { pid: number };

/** Appends events to a JSON-lines file (or nowhere, for the in-process baseline). */
export class Journal {
  constructor(private readonly path: string | null) {}

  write(event: JournalEvent): void {
    if (this.path) appendFileSync(this.path, JSON.stringify({ ...event, pid: process.pid }) + '\n');
  }

  /** The lines of a journal; a line torn by a kill is skipped. */
  static read(path: string): JournalLine[] {
    if (!existsSync(path)) return [];
    return readFileSync(path, 'utf8')
      .split('\n')
      .filter((line) => line.endsWith('}'))
      .map((line) => JSON.parse(line) as JournalLine);
  }
}

export interface EffectsConfig {
  httpUrl: string;
  ledger: LedgerTables;
  journal: Journal;
  /** Called at every interesting point (the worker kills itself at the Nth); a no-op by default. */
  tick: (label: string) => void;
  /** Work each step does before its effects, so time-based kills land inside steps too. */
  stepDelayMs: number;
}

export const EFFECTS_CONFIG: ServiceIdentifier<EffectsConfig> = Symbol.for('test:crash:effects-config');

// A reconcile hook is declared with the decorator, outside the container: it reads the process's config here.
let reconcileConfig: EffectsConfig | undefined;

async function reconcileCharge({ key }: ReconcileContext): Promise<ReconcileOutcome> {
  const config = reconcileConfig!;
  config.tick('reconcile:before');
  const res = await requestJson('GET', `${config.httpUrl}/charges/${encodeURIComponent(key)}`);
  config.journal.write({ event: 'reconcile', key, found: res.status === 200 });
  config.tick('reconcile:after');
  return res.status === 200 ? { happened: true, result: { id: res.body.id, key } } : { happened: false };
}

export interface Receipt {
  id: string;
  key: string;
}

export interface Booking {
  item: string;
  amount: number;
  key: string;
}

@injectable()
export class LedgerEffects {
  constructor(@inject(EFFECTS_CONFIG) private readonly config: EffectsConfig) {}

  /** Books into the application's ledger, in the step's transaction: exactly once. */
  @SideEffect({ name: 'book', transactional: true })
  async book(item: string, amount: number): Promise<Booking> {
    const op = currentOperation();
    this.config.tick('book:before');
    await book(this.config.ledger, currentTransaction(), { run_id: op.runId, op_key: op.key, item, amount }, op.runId);
    this.config.tick('book:after');
    return { item, amount, key: op.key };
  }
}

@injectable()
export class ApiEffects {
  constructor(@inject(EFFECTS_CONFIG) private readonly config: EffectsConfig) {}

  /** An external call with an idempotency key: repeated only with the same key. */
  @SideEffect({ name: 'notify' })
  notify(to: string, text: string): Promise<Receipt> {
    return this.post('/notify', { to, text });
  }

  /** An external call whose outcome, when unknown after a crash, is asked from the API. */
  @SideEffect({ name: 'charge', reconcile: reconcileCharge })
  charge(amount: number): Promise<Receipt> {
    return this.post('/charges', { amount });
  }

  private async post(path: string, payload: Record<string, unknown>): Promise<Receipt> {
    const op = currentOperation();
    this.config.tick(`http${path}:before`);
    const res = await requestJson('POST', `${this.config.httpUrl}${path}`, { runId: op.runId, ...payload }, { 'Idempotency-Key': op.key, 'X-Worker-Pid': String(process.pid) });
    if (res.status !== 200) throw new Error(`POST ${path} answered ${res.status}: ${JSON.stringify(res.body)}`);
    this.config.tick(`http${path}:after`);
    return { id: String(res.body.id), key: op.key };
  }
}

type Ctx = StepContext<Record<string, unknown>>;

/** Common to the agents: journal the step's start, do some work, and journal each effect that returned. */
abstract class Journaled extends Agent {
  constructor(protected readonly config: EffectsConfig) {
    super();
  }

  protected async begin(ctx: Ctx): Promise<void> {
    this.config.journal.write({ event: 'step', step: `${ctx.agentId}/${ctx.stepName}` });
    if (this.config.stepDelayMs > 0) await sleep(this.config.stepDelayMs);
  }

  /** The effect returned, so its outcome is recorded: a later repeat of its key would be a violation. */
  protected returned<T extends { key: string }>(value: T): T {
    this.config.journal.write({ event: 'returned', key: value.key });
    return value;
  }
}

@injectable()
export class Orders extends Journaled {
  constructor(
    @inject(EFFECTS_CONFIG) config: EffectsConfig,
    @inject(LedgerEffects) private readonly ledger: LedgerEffects,
    @inject(ApiEffects) private readonly api: ApiEffects,
  ) {
    super(config);
  }

  @Step() async reserve(ctx: Ctx) {
    await this.begin(ctx);
    const a = this.returned(await this.ledger.book('reserve-a', 10));
    const b = this.returned(await this.ledger.book('reserve-b', 20));
    return { reserved: [a, b] };
  }

  @Step() async notify(ctx: Ctx) {
    await this.begin(ctx);
    const count = (ctx.state.reserved as Booking[]).length;
    const ops = this.returned(await this.api.notify('ops@example.com', `${count} items reserved`));
    const sales = this.returned(await this.api.notify('sales@example.com', `${count} items reserved`));
    return { notified: [ops, sales] };
  }
}

@injectable()
export class Billing extends Journaled {
  constructor(
    @inject(EFFECTS_CONFIG) config: EffectsConfig,
    @inject(LedgerEffects) private readonly ledger: LedgerEffects,
    @inject(ApiEffects) private readonly api: ApiEffects,
  ) {
    super(config);
  }

  @Step() async charge(ctx: Ctx) {
    await this.begin(ctx);
    return { charge: this.returned(await this.api.charge(30)) };
  }

  /** The external notice first, then the booking: on SQLite nothing outside the transaction may follow it. */
  @Step() async settle(ctx: Ctx) {
    await this.begin(ctx);
    const notice = this.returned(await this.api.notify('finance@example.com', `charged ${(ctx.state.charge as Receipt).id}`));
    const booking = this.returned(await this.ledger.book('settle', 30));
    return { settled: { notice, booking } };
  }
}

@injectable()
export class Reporting extends Journaled {
  constructor(
    @inject(EFFECTS_CONFIG) config: EffectsConfig,
    @inject(LedgerEffects) private readonly ledger: LedgerEffects,
  ) {
    super(config);
  }

  @Step() async record(ctx: Ctx) {
    await this.begin(ctx);
    const fee = this.returned(await this.ledger.book('fee', 1));
    const tax = this.returned(await this.ledger.book('tax', 2));
    return { fees: [fee, tax] };
  }

  @Step() async summarize(ctx: Ctx) {
    await this.begin(ctx);
    const bookings = [...(ctx.state.reserved as Booking[]), (ctx.state.settled as { booking: Booking }).booking, ...(ctx.state.fees as Booking[])];
    return { summary: { booked: bookings.reduce((sum, b) => sum + b.amount, 0), items: bookings.map((b) => b.item) } };
  }
}

@Pipeline({ name: 'effects-harness', version: '1.0.0', agents: [Orders, Billing, Reporting] })
export class EffectsPipeline {}

/** Binds the config and the effect services (singletons: one per process). */
export function effectsPipelineModule(config: EffectsConfig): ContainerModule {
  reconcileConfig = config;
  return new ContainerModule(({ bind }) => {
    bind(EFFECTS_CONFIG).toConstantValue(config);
    bind(LedgerEffects).toSelf().inSingletonScope();
    bind(ApiEffects).toSelf().inSingletonScope();
  });
}
