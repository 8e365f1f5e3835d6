import 'reflect-metadata';
import { mkdirSync } from 'node:fs';
import { dirname } from 'node:path';
import { ContainerModule } from 'inversify';
import { Pipeline, postgresStorage, readPlan, sqliteStorage } from 'waypoint-durable';
import { CodeGenAgent, ReportingAgent, ResearchAgent, ValidationAgent } from './agents';
import { FakeLlm, LLM, type FakeLlmOptions } from './llm';
import { MAILER_CONFIG, Mailer } from './mailer';
import { AnalysisState } from './state';

/**
 * The tutorial's four-agent financial analysis: research, code generation, validation, reporting.
 *
 * @example
 * const waypoint = await Waypoint.create({ modules: [exampleModule({ outboxPath }), sqliteStorage({ path })] });
 * const result = await waypoint.run(FinancialAnalysis, { runId: 'q3-aapl', input: DEMO_INPUT });
 */
@Pipeline({
  name: 'financial-analysis',
  version: '2.1.0',
  state: AnalysisState,
  agents: [ResearchAgent, CodeGenAgent, ValidationAgent, ReportingAgent],
})
export class FinancialAnalysis {}

/** The input every example run uses (a resumed run must be given the same input, or none). */
export const DEMO_INPUT = { ticker: 'AAPL', quarter: 'Q3-2026', recipients: ['cfo@example.com', 'research@example.com'] } as const;

/** Step keys (`agentId/stepName`) of the pipeline, in execution order. */
export function stepKeys(): string[] {
  return readPlan(FinancialAnalysis).steps.map((s) => s.key);
}

/** What the example's services need: the fake LLM's settings and the outbox file. */
export interface ExampleOptions {
  llm?: FakeLlmOptions;
  outboxPath: string;
}

/**
 * Binds the example's services: the fake LLM (one instance per container, so its call counter and
 * hold flag are per process) and the mailer with its outbox.
 *
 * @example
 * Waypoint.create({ modules: [exampleModule({ llm: { delayMs: 10 }, outboxPath: '/tmp/outbox.jsonl' }), memoryStorage()] });
 */
export function exampleModule(options: ExampleOptions): ContainerModule {
  return new ContainerModule(({ bind }) => {
    bind(LLM).toConstantValue(new FakeLlm(options.llm));
    bind(MAILER_CONFIG).toConstantValue({ outboxPath: options.outboxPath });
    bind(Mailer).toSelf().inSingletonScope();
  });
}

/**
 * Example settings from the environment: WAYPOINT_LLM_DELAY_MS (default 150), WAYPOINT_LLM_LOG (call log
 * file), WAYPOINT_LLM_HOLD (tag of a call to keep in flight, for crash tests), WAYPOINT_OUTBOX (default
 * ./.waypoint/outbox.jsonl).
 */
export function exampleOptionsFromEnv(env: NodeJS.ProcessEnv = process.env): ExampleOptions {
  return {
    llm: {
      delayMs: env.WAYPOINT_LLM_DELAY_MS === undefined ? undefined : Number(env.WAYPOINT_LLM_DELAY_MS),
      logPath: env.WAYPOINT_LLM_LOG || undefined,
      holdTag: env.WAYPOINT_LLM_HOLD || undefined,
    },
    outboxPath: env.WAYPOINT_OUTBOX || './.waypoint/outbox.jsonl',
  };
}

/**
 * The checkpoint store from the environment: PostgreSQL when WAYPOINT_PG_URL is set (schema from
 * WAYPOINT_PG_SCHEMA), else the SQLite file WAYPOINT_DB (default ./.waypoint/demo.db).
 */
export function storageFromEnv(env: NodeJS.ProcessEnv = process.env): ContainerModule {
  if (env.WAYPOINT_PG_URL) return postgresStorage({ url: env.WAYPOINT_PG_URL, schema: env.WAYPOINT_PG_SCHEMA || undefined });
  const path = env.WAYPOINT_DB || './.waypoint/demo.db';
  // The default lives in a directory that may not exist on a fresh checkout.
  mkdirSync(dirname(path), { recursive: true });
  return sqliteStorage({ path });
}
