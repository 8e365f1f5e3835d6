import type { ModelCallEvent } from '../../src/index';
import { NoopTelemetry } from '../../src/index';
import { openWaypoint, Research, scenario, type StoreSpec } from './ai-agent';

/**
 * Child process of the AI SDK crash tests: runs (or resumes) run AI_RUN_ID of the research pipeline on
 * the store AI_STORE (a JSON StoreSpec), SIGKILLing itself where AI_KILL_AT says, and prints one JSON
 * line: the run's status and state, and the model calls it made or reused (from telemetry).
 */
class ModelCalls extends NoopTelemetry {
  readonly events: ModelCallEvent[] = [];
  modelCall(event: ModelCallEvent): void {
    this.events.push(event);
  }
}

async function main(): Promise<void> {
  const spec = JSON.parse(process.env.AI_STORE!) as StoreSpec;
  scenario.log = process.env.AI_LOG ?? '';
  scenario.killAt = process.env.AI_KILL_AT ?? '';
  scenario.stream = process.env.AI_STREAM === '1';
  scenario.flakyTurn = Number(process.env.AI_FLAKY_TURN ?? 0);
  const telemetry = new ModelCalls();
  const waypoint = await openWaypoint(spec, telemetry);
  try {
    const result = await waypoint.run(Research, { runId: process.env.AI_RUN_ID!, input: {} });
    process.stdout.write(JSON.stringify({ status: result.status, resumed: result.resumed, state: result.state, modelCalls: telemetry.events }) + '\n');
  } finally {
    await waypoint.close();
  }
}

main().catch((error: unknown) => {
  process.stderr.write(`${error instanceof Error ? error.stack : String(error)}\n`);
  process.exit(1);
});
