/**
 * The `--module` the CLI tests give `waypoint-durable runs resume`: the financial-analysis example's pipeline
 * and its services, configured from the environment as the example worker is (WAYPOINT_OUTBOX,
 * WAYPOINT_LLM_DELAY_MS, WAYPOINT_LLM_LOG). The store comes from `--store`.
 */
import 'reflect-metadata';
import type { CreateOptions } from '../../src/index';
import { FinancialAnalysis, exampleModule, exampleOptionsFromEnv } from '../../examples/financial-analysis/pipeline';

export const pipelines = [FinancialAnalysis];

export function createWaypointOptions(): CreateOptions {
  return { modules: [exampleModule(exampleOptionsFromEnv(process.env))], leaseTtlMs: 5_000 };
}
