import 'reflect-metadata';
import { mkdirSync } from 'node:fs';
import { dirname } from 'node:path';
import { ContainerModule } from 'inversify';
import { Pipeline, branch, forEach, loop, parallel, sqliteStorage } from 'waypoint-durable';
import {
  ApiResearch,
  CodeGen,
  DocsResearch,
  Escalate,
  FileReviewer,
  ImpactAnalyst,
  Planner,
  Publisher,
  ReportWriter,
  SecurityReview,
  Summarizer,
  Validate,
  WebResearch,
} from './agents';
import { FakeLlm, LLM, type FakeLlmOptions } from './llm';
import { OUTBOX_CONFIG, Outbox } from './outbox';
import { CustomerReportState, ReviewState } from './state';

/**
 * One child run per customer (`<parent>/reports/<index>`): the customer is its input and its `ctx.item`,
 * its final state lands in the parent's `reports[index]`. A child pipeline needs no registration of its own.
 */
@Pipeline({ name: 'customer-report', version: '1.0.0', state: CustomerReportState, agents: [ImpactAnalyst, ReportWriter] })
export class CustomerReport {}

/**
 * A code review using every control-flow construct: research in parallel (a branch may be a sequence),
 * code generation and tests in a loop until they pass, a security review only for risky changes, one
 * reviewer per file (three at a time), one child run per customer, and the emails at the end.
 *
 * @example
 * const waypoint = await Waypoint.create({ modules: [exampleModule({ outboxPath }), memoryStorage()], pipelines: [CodeReview] });
 * const result = await waypoint.run(CodeReview, { runId: 'pr-481', input: DEMO_INPUT });
 */
@Pipeline({
  name: 'code-review',
  version: '1.0.0',
  state: ReviewState,
  agents: [
    Planner,
    parallel(WebResearch, [DocsResearch, Summarizer], ApiResearch),
    loop({ until: (s: ReviewState) => s.testsPass === true, maxIterations: 5 }, CodeGen, Validate),
    branch((s: ReviewState) => s.risk ?? 'low', { high: [SecurityReview, Escalate], low: [] }),
    forEach((s: ReviewState) => s.files ?? [], FileReviewer, { into: 'reviews', concurrency: 3 }),
    forEach((s: ReviewState) => s.customers ?? [], CustomerReport, { into: 'reports', concurrency: 2 }),
    Publisher,
  ],
})
export class CodeReview {}

/** The input every example run uses (a resumed run must be given the same input, or none). */
export const DEMO_INPUT = { repo: 'acme/payments', change: 'retry failed refunds' } as const;

/** What the example's services need: the fake LLM's settings and the outbox file. */
export interface ExampleOptions {
  llm?: FakeLlmOptions;
  outboxPath: string;
}

/**
 * Binds the example's services: the fake LLM and the outbox.
 *
 * @example
 * Waypoint.create({ modules: [exampleModule({ llm: { delayMs: 0 }, outboxPath: '/tmp/outbox.jsonl' }), memoryStorage()] });
 */
export function exampleModule(options: ExampleOptions): ContainerModule {
  return new ContainerModule(({ bind }) => {
    bind(LLM).toConstantValue(new FakeLlm(options.llm));
    bind(OUTBOX_CONFIG).toConstantValue({ outboxPath: options.outboxPath });
    bind(Outbox).toSelf().inSingletonScope();
  });
}

/**
 * Example settings from the environment: WAYPOINT_LLM_DELAY_MS (default 150), WAYPOINT_LLM_LOG (call log
 * file), WAYPOINT_OUTBOX (default ./.waypoint/outbox.jsonl).
 */
export function exampleOptionsFromEnv(env: NodeJS.ProcessEnv = process.env): ExampleOptions {
  return {
    llm: {
      delayMs: env.WAYPOINT_LLM_DELAY_MS === undefined || env.WAYPOINT_LLM_DELAY_MS === '' ? undefined : Number(env.WAYPOINT_LLM_DELAY_MS),
      logPath: env.WAYPOINT_LLM_LOG || undefined,
    },
    outboxPath: env.WAYPOINT_OUTBOX || './.waypoint/outbox.jsonl',
  };
}

/** The SQLite file WAYPOINT_DB (default ./.waypoint/code-review.db). */
export function storageFromEnv(env: NodeJS.ProcessEnv = process.env): ContainerModule {
  const path = env.WAYPOINT_DB || './.waypoint/code-review.db';
  // The default lives in a directory that may not exist on a fresh checkout.
  mkdirSync(dirname(path), { recursive: true });
  return sqliteStorage({ path });
}
