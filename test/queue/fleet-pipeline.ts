import 'reflect-metadata';
import { IsInt, IsOptional, IsString, Min } from 'class-validator';
import { ContainerModule, inject, injectable, type ServiceIdentifier } from 'inversify';
import { Pool } from 'pg';
import { Agent, Pipeline, SideEffect, Step, currentOperation, readPlan, type StepContext } from '../../src/index';

/** State of the fleet test pipeline: the input (customer, amount) and what the steps add. */
export class FleetState {
  @IsString()
  customer!: string;

  @IsInt()
  @Min(1)
  amount!: number;

  @IsOptional()
  @IsString()
  receipt?: string;
}

/** Where and how the test pipeline records what it does: its own tables next to the store's. */
export interface FleetEnvConfig {
  url: string;
  schema: string;
  /** Id written into every log row: the worker process that ran the step. */
  worker: string;
  stepMs: number;
}

export const FLEET_ENV: ServiceIdentifier<FleetEnv> = Symbol.for('waypoint-test:FleetEnv');

/** DDL of the tables the test pipeline writes (the test creates them before any worker starts). */
export function fleetTablesSql(schema: string): string {
  return `
    CREATE SCHEMA IF NOT EXISTS "${schema}";
    CREATE TABLE IF NOT EXISTS "${schema}".fleet_step_log (
      id bigserial PRIMARY KEY, run_id text NOT NULL, step text NOT NULL, worker text NOT NULL,
      started_at timestamptz NOT NULL DEFAULT clock_timestamp(), ended_at timestamptz);
    CREATE TABLE IF NOT EXISTS "${schema}".fleet_effect_calls (
      id bigserial PRIMARY KEY, op_key text NOT NULL, run_id text NOT NULL, worker text NOT NULL);
    CREATE TABLE IF NOT EXISTS "${schema}".fleet_effects (
      op_key text PRIMARY KEY, run_id text NOT NULL, worker text NOT NULL);`;
}

/**
 * The step log and the "external system" of the test: every step execution is a row (start and end on
 * the database clock, so rows of different processes compare), every side-effect call is a row, and the
 * effect itself lands in a table keyed by its idempotency key, like a payment provider would dedupe.
 */
export class FleetEnv {
  readonly pool: Pool;
  constructor(readonly config: FleetEnvConfig) {
    this.pool = new Pool({ connectionString: config.url, max: 3 });
  }

  async step<T>(ctx: StepContext, fn: () => T | Promise<T>): Promise<T> {
    const { rows } = await this.pool.query<{ id: string }>(`INSERT INTO "${this.config.schema}".fleet_step_log (run_id, step, worker) VALUES ($1, $2, $3) RETURNING id`, [
      ctx.runId,
      ctx.stepName,
      this.config.worker,
    ]);
    // Not tied to ctx.signal: on shutdown the step finishes within its grace period, as real work would.
    await new Promise((resolve) => setTimeout(resolve, this.config.stepMs));
    const result = await fn();
    await this.pool.query(`UPDATE "${this.config.schema}".fleet_step_log SET ended_at = clock_timestamp() WHERE id = $1`, [rows[0].id]);
    return result;
  }

  async close(): Promise<void> {
    await this.pool.end();
  }
}

/** The external write of the pipeline: a charge, guarded by Waypoint, deduplicated by the provider by key. */
@injectable()
export class Ledger {
  constructor(@inject(FLEET_ENV) private readonly env: FleetEnv) {}

  @SideEffect({ name: 'charge' })
  async charge(runId: string, amount: number): Promise<string> {
    const { key } = currentOperation();
    const { schema, worker } = this.env.config;
    await this.env.pool.query(`INSERT INTO "${schema}".fleet_effect_calls (op_key, run_id, worker) VALUES ($1, $2, $3)`, [key, runId, worker]);
    await this.env.pool.query(`INSERT INTO "${schema}".fleet_effects (op_key, run_id, worker) VALUES ($1, $2, $3) ON CONFLICT (op_key) DO NOTHING`, [key, runId, worker]);
    return `receipt-${runId}-${amount}`;
  }
}

type Ctx = StepContext<FleetState>;

@injectable()
export class IntakeAgent extends Agent {
  constructor(@inject(FLEET_ENV) private readonly env: FleetEnv) {
    super();
  }

  @Step()
  async s1(ctx: Ctx) {
    return this.env.step(ctx, () => ({ s1: `${ctx.state.customer}:1` }));
  }

  @Step()
  async s2(ctx: Ctx) {
    return this.env.step(ctx, () => ({ s2: 2 }));
  }

  @Step()
  async s3(ctx: Ctx) {
    return this.env.step(ctx, () => ({ s3: 3 }));
  }
}

@injectable()
export class SettleAgent extends Agent {
  constructor(
    @inject(FLEET_ENV) private readonly env: FleetEnv,
    @inject(Ledger) private readonly ledger: Ledger,
  ) {
    super();
  }

  @Step()
  async s4(ctx: Ctx) {
    return this.env.step(ctx, async () => ({ receipt: await this.ledger.charge(ctx.runId, ctx.state.amount) }));
  }

  @Step()
  async s5(ctx: Ctx) {
    return this.env.step(ctx, () => ({ s5: 5 }));
  }

  @Step()
  async s6(ctx: Ctx) {
    return this.env.step(ctx, () => ({ s6: 6 }));
  }
}

/** Six short steps over two agents; the fourth charges once per run. */
@Pipeline({ name: 'fleet-test', version: '1.0.0', state: FleetState, agents: [IntakeAgent, SettleAgent] })
export class FleetPipeline {}

/** `agentId/stepName` of every step, in order. */
export function fleetStepKeys(): string[] {
  return readPlan(FleetPipeline).steps.map((s) => s.key);
}

/** Binds the test pipeline's services. */
export function fleetModule(env: FleetEnv): ContainerModule {
  return new ContainerModule(({ bind }) => {
    bind(FLEET_ENV).toConstantValue(env);
    bind(Ledger).toSelf().inSingletonScope();
  });
}
