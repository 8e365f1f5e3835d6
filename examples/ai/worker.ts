import { writeSync } from 'node:fs';
import { ContainerModule } from 'inversify';
import { NoopTelemetry, TOKENS, Waypoint, sqliteStorage, type Logger, type ModelCallEvent } from 'waypoint-durable';
import { chooseModel, ResearchDemo, useModel } from './agent';

/**
 * One process of `npm run demo:ai`: runs (or resumes) run WAYPOINT_AI_RUN on the SQLite file
 * WAYPOINT_AI_DB. Prints a `MODEL` line per model call as it happens (paid for or reused from the log)
 * and a `RESULT` line at the end. Exit code 2 when the chosen provider's package is not installed.
 */
class PrintModelCalls extends NoopTelemetry {
  modelCall(event: ModelCallEvent): void {
    writeSync(1, `MODEL ${JSON.stringify({ outcome: event.outcome, inputTokens: event.inputTokens, outputTokens: event.outputTokens })}\n`);
  }
}

const quiet: Logger = { debug() {}, info() {}, warn() {}, error() {} };

async function main(): Promise<number> {
  const chosen = chooseModel();
  if ('missing' in chosen) {
    process.stderr.write(`${chosen.missing}\n`);
    return 2;
  }
  useModel(chosen.model);
  const extras = new ContainerModule(({ bind }) => {
    bind(TOKENS.Logger).toConstantValue(quiet);
    bind(TOKENS.Telemetry).toConstantValue(new PrintModelCalls());
  });
  const waypoint = await Waypoint.create({ modules: [sqliteStorage({ path: process.env.WAYPOINT_AI_DB! }), extras], pipelines: [ResearchDemo] });
  try {
    const result = await waypoint.run(ResearchDemo, { runId: process.env.WAYPOINT_AI_RUN!, input: { question: 'How do durable pipelines survive crashes?' } });
    writeSync(1, `RESULT ${JSON.stringify({ status: result.status, state: result.state })}\n`);
    return 0;
  } finally {
    await waypoint.close();
  }
}

main().then(
  (code) => (process.exitCode = code),
  (error: unknown) => {
    process.stderr.write(`${error instanceof Error ? error.stack : String(error)}\n`);
    process.exitCode = 1;
  },
);
