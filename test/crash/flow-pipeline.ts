import 'reflect-metadata';
import { setTimeout as sleep } from 'node:timers/promises';
import { IsInt, IsOptional, IsString } from 'class-validator';
import { ContainerModule, inject, injectable, type ServiceIdentifier } from 'inversify';
import { Agent, Pipeline, Reducer, SideEffect, Step, branch, currentOperation, currentTransaction, forEach, loop, parallel, type StepContext } from '../../src/index';
import { book, type LedgerRow, type LedgerTables } from '../effects/ledger';

/**
 * The control-flow crash pipeline: every construct in one run. A plan, then `parallel` (three branches,
 * one a sequence), a `loop` until a counter reaches 3 with a `@Step({ when })` inside, a `branch` on the
 * loop's outcome, a `forEach` over an agent (one booking per item), a `forEach` over a child `@Pipeline`
 * (one booking per child run), and a total. `trail` is a `@Reducer` list every construct appends to.
 * Every output is a pure function of the input and of what earlier steps returned (never of timing), so
 * a crashed and resumed run must end with the state of an uncrashed one.
 */

const concat = (a: string[] = [], b: string[] = []) => [...a, ...b];

export interface Booking {
  item: string;
  amount: number;
  key: string;
}

export interface Customer {
  name: string;
  tier: number;
}

export class FlowCrashState {
  @IsString() runId!: string;
  @IsInt() itemCount!: number;
  @IsInt() customerCount!: number;
  @IsOptional() @Reducer(concat) trail?: string[];
  @IsOptional() items?: string[];
  @IsOptional() customers?: Customer[];
  @IsOptional() web?: string;
  @IsOptional() docs?: string;
  @IsOptional() summary?: string;
  @IsOptional() api?: string;
  @IsOptional() counter?: number;
  @IsOptional() bumps?: number;
  @IsOptional() notedAt?: number;
  @IsOptional() risk?: string;
  @IsOptional() reviewed?: boolean;
  @IsOptional() escalated?: boolean;
  @IsOptional() processed?: { item: string; index: number; booking: Booking }[];
  @IsOptional() reports?: CustomerState[];
  @IsOptional() total?: { items: number; booked: number; reports: number; invoiced: number };
}

export class CustomerState {
  @IsOptional() @IsString() name?: string;
  @IsOptional() @IsInt() tier?: number;
  @IsOptional() score?: number;
  @IsOptional() invoice?: Booking;
  @IsOptional() report?: string;
}

/** Books one item: into the application's ledger in the step's transaction, or into a list in memory. */
export interface Ledger {
  book(item: string, amount: number): Promise<Booking>;
}

export const FLOW_LEDGER: ServiceIdentifier<Ledger> = Symbol.for('test:crash:flow-ledger');
export const FLOW_DELAY: ServiceIdentifier<StepDelay> = Symbol.for('test:crash:flow-delay');

/** How long a step works before it returns (seeded per process and path), so kills land inside steps. */
export type StepDelay = (runId: string, path: string) => number;

/** The root run of a run id (`<root>/<into>/<index>` for a child run): the account its bookings go to. */
function rootOf(runId: string): string {
  return runId.split('/')[0];
}

/** Transactional bookings in the ledger table next to the checkpoints: committed with the step, exactly once. */
export class TransactionalLedger implements Ledger {
  constructor(private readonly tables: LedgerTables) {}

  @SideEffect({ name: 'book', transactional: true })
  async book(item: string, amount: number): Promise<Booking> {
    const op = currentOperation();
    await book(this.tables, currentTransaction(), { run_id: op.runId, op_key: op.key, item, amount }, rootOf(op.runId));
    return { item, amount, key: op.key };
  }
}

/** The memory store has no transactions: the uncrashed baseline books into a list, with the same keys. */
export class MemoryLedger implements Ledger {
  readonly rows: LedgerRow[] = [];

  @SideEffect({ name: 'book' })
  book(item: string, amount: number): Promise<Booking> {
    const op = currentOperation();
    this.rows.push({ run_id: op.runId, op_key: op.key, item, amount });
    return Promise.resolve({ item, amount, key: op.key });
  }
}

type Ctx = StepContext<FlowCrashState>;

/** Common to the agents: wait the step's seeded delay. */
abstract class Working<M = Record<string, unknown>> extends Agent<M> {
  constructor(protected readonly delay: StepDelay) {
    super();
  }

  protected async work(ctx: StepContext<object>): Promise<void> {
    const ms = this.delay(ctx.runId, ctx.path);
    if (ms > 0) await sleep(ms);
  }
}

@injectable()
export class Planner extends Working {
  constructor(@inject(FLOW_DELAY) delay: StepDelay) {
    super(delay);
  }
  @Step() async plan(ctx: Ctx) {
    await this.work(ctx);
    const items = Array.from({ length: ctx.state.itemCount }, (_, i) => `item-${i}`);
    const customers = Array.from({ length: ctx.state.customerCount }, (_, i): Customer => ({ name: `customer-${i}`, tier: i % 3 }));
    return { items, customers, trail: ['plan'] };
  }
}

@injectable()
export class WebResearch extends Working {
  constructor(@inject(FLOW_DELAY) delay: StepDelay) {
    super(delay);
  }
  @Step() async search(ctx: Ctx) {
    await this.work(ctx);
    return { web: `web(${ctx.state.items?.length})`, trail: ['web'] };
  }
}

@injectable()
export class DocsResearch extends Working {
  constructor(@inject(FLOW_DELAY) delay: StepDelay) {
    super(delay);
  }
  @Step() async read(ctx: Ctx) {
    await this.work(ctx);
    return { docs: 'docs', trail: ['docs'] };
  }
}

@injectable()
export class Summarizer extends Working {
  constructor(@inject(FLOW_DELAY) delay: StepDelay) {
    super(delay);
  }
  /** A branch sees the state at the fork plus its own updates: never the sibling's `web`. */
  @Step() async summarize(ctx: Ctx) {
    await this.work(ctx);
    return { summary: `sum(${ctx.state.docs})/${ctx.state.web ?? 'no-web'}`, trail: ['summary'] };
  }
}

@injectable()
export class ApiResearch extends Working {
  constructor(@inject(FLOW_DELAY) delay: StepDelay) {
    super(delay);
  }
  @Step() async call(ctx: Ctx) {
    await this.work(ctx);
    return { api: 'api', trail: ['api'] };
  }
}

/** Counts in state and in its memory: a memory lost or restored twice across a crash shows in `bumps`. */
@injectable()
export class Counter extends Working<{ bumps: number }> {
  override memory = { bumps: 0 };
  constructor(@inject(FLOW_DELAY) delay: StepDelay) {
    super(delay);
  }
  @Step() async bump(ctx: Ctx) {
    await this.work(ctx);
    this.memory.bumps += 1;
    return { counter: (ctx.state.counter ?? 0) + 1, bumps: this.memory.bumps, trail: [`bump${ctx.iteration}`] };
  }
  /** Runs in the iteration that brings the counter to 2 only; skipped (a recorded row) in the others. */
  @Step({ when: (s: FlowCrashState) => s.counter === 2 }) async note(ctx: Ctx) {
    await this.work(ctx);
    return { notedAt: ctx.iteration, trail: ['note'] };
  }
}

@injectable()
export class HumanReview extends Working {
  constructor(@inject(FLOW_DELAY) delay: StepDelay) {
    super(delay);
  }
  @Step() async review(ctx: Ctx) {
    await this.work(ctx);
    return { reviewed: true, risk: 'high', trail: ['reviewed'] };
  }
}

@injectable()
export class Escalate extends Working {
  constructor(@inject(FLOW_DELAY) delay: StepDelay) {
    super(delay);
  }
  @Step() async escalate(ctx: Ctx) {
    await this.work(ctx);
    return { escalated: true, trail: ['escalated'] };
  }
}

@injectable()
export class AutoApprove extends Working {
  constructor(@inject(FLOW_DELAY) delay: StepDelay) {
    super(delay);
  }
  @Step() async approve(ctx: Ctx) {
    await this.work(ctx);
    return { risk: 'low', trail: ['approved'] };
  }
}

/** One booking per item, its key unique to the item's path. */
@injectable()
export class ItemWorker extends Working {
  constructor(
    @inject(FLOW_DELAY) delay: StepDelay,
    @inject(FLOW_LEDGER) private readonly ledger: Ledger,
  ) {
    super(delay);
  }
  @Step() async process(ctx: Ctx) {
    await this.work(ctx);
    const index = ctx.itemIndex!;
    const booking = await this.ledger.book(String(ctx.item), index + 1);
    return { item: String(ctx.item), index, booking };
  }
}

@injectable()
export class Scorer extends Working {
  constructor(@inject(FLOW_DELAY) delay: StepDelay) {
    super(delay);
  }
  @Step() async score(ctx: StepContext<CustomerState>) {
    await this.work(ctx);
    return { score: (ctx.state.tier ?? 0) * 10 + (ctx.state.name ?? '').length };
  }
}

/** The child run's booking (its key carries the child's run id). */
@injectable()
export class Invoicer extends Working {
  constructor(
    @inject(FLOW_DELAY) delay: StepDelay,
    @inject(FLOW_LEDGER) private readonly ledger: Ledger,
  ) {
    super(delay);
  }
  @Step() async invoice(ctx: StepContext<CustomerState>) {
    await this.work(ctx);
    const invoice = await this.ledger.book(`invoice-${ctx.state.name}`, ctx.state.score ?? 0);
    return { invoice, report: `${ctx.state.name} #${ctx.itemIndex}: ${invoice.amount}` };
  }
}

@Pipeline({ name: 'flow-crash-customer', version: '1.0.0', state: CustomerState, agents: [Scorer, Invoicer] })
export class CustomerReport {}

@injectable()
export class Totals extends Working {
  constructor(@inject(FLOW_DELAY) delay: StepDelay) {
    super(delay);
  }
  @Step() async total(ctx: Ctx) {
    await this.work(ctx);
    const processed = ctx.state.processed ?? [];
    const reports = ctx.state.reports ?? [];
    return {
      total: {
        items: processed.length,
        booked: processed.reduce((sum, p) => sum + p.booking.amount, 0),
        reports: reports.length,
        invoiced: reports.reduce((sum, r) => sum + (r.invoice?.amount ?? 0), 0),
      },
      trail: ['total'],
    };
  }
}

@Pipeline({
  name: 'flow-crash',
  version: '1.0.0',
  state: FlowCrashState,
  agents: [
    Planner,
    parallel(WebResearch, [DocsResearch, Summarizer], ApiResearch),
    loop({ until: (s: FlowCrashState) => (s.counter ?? 0) >= 3, maxIterations: 6 }, Counter),
    branch((s: FlowCrashState) => (s.counter === 3 && s.bumps === 3 ? 'high' : 'low'), { high: [HumanReview, Escalate], low: AutoApprove }),
    forEach((s: FlowCrashState) => s.items ?? [], ItemWorker, { into: 'processed', concurrency: 4 }),
    forEach((s: FlowCrashState) => s.customers ?? [], CustomerReport, { into: 'reports', concurrency: 2 }),
    Totals,
  ],
})
export class FlowCrashPipeline {}

/** The input of a trial's run. */
export function flowInput(runId: string, size: { items: number; customers: number }): Record<string, unknown> {
  return { runId, itemCount: size.items, customerCount: size.customers };
}

/** Items and child runs per trial unless told otherwise (the 30 items and 5 customers). */
export const FLOW_SIZE = { items: 30, customers: 5 } as const;

/**
 * Binds the ledger (transactional in the store's database, or the given in-memory list) and the step
 * delay. One module per process.
 */
export function flowPipelineModule(ledger: LedgerTables | MemoryLedger, delay: StepDelay): ContainerModule {
  return new ContainerModule(({ bind }) => {
    if (ledger instanceof MemoryLedger) bind(FLOW_LEDGER).toConstantValue(ledger);
    else bind(FLOW_LEDGER).toConstantValue(new TransactionalLedger(ledger));
    bind(FLOW_DELAY).toConstantValue(delay);
  });
}

/** A deterministic delay in [0, maxMs] for (seed, process, run, path): the same on every machine. */
export function seededDelay(seed: number, processIndex: number, maxMs: number): StepDelay {
  return (runId, path) => {
    if (maxMs <= 0) return 0;
    let h = (Math.imul(seed >>> 0, 0x9e3779b1) ^ Math.imul(processIndex + 1, 0x85ebca6b)) >>> 0;
    for (const ch of `${runId}|${path}`) h = Math.imul(h ^ ch.charCodeAt(0), 0x01000193) >>> 0;
    return h % (maxMs + 1);
  };
}
