/**
 * One process of the LangGraph demo (started by demo.ts; it can be killed at any point):
 *
 *   node worker.js report <thread>          runs (or resumes) the research graph to the end
 *   node worker.js ask <thread>             runs the approval graph until it asks a human, then exits
 *   node worker.js answer <thread> <json>   resumes the approval graph with Command({ resume: <json> })
 *
 * Storage comes from the environment (see saverFromEnv). The last stdout line is `RESULT <json>` or
 * `INTERRUPT <json>`.
 */
import { Command } from '@langchain/langgraph';
import { WaypointCheckpointSaver } from 'waypoint-durable/langgraph';
import { TypeOrmCheckpointStore } from 'waypoint-durable';
import { approvalGraph, reportGraph } from './graphs';

/**
 * The saver on the demo's storage: `WAYPOINT_LG_BACKEND` = sqlite (default; file `WAYPOINT_LG_DB`),
 * postgres (`WAYPOINT_LG_URL`, schema `WAYPOINT_LG_SCHEMA`) or redis (`WAYPOINT_LG_URL`, key prefix
 * `WAYPOINT_LG_SCHEMA`). The caller closes the returned store and saver.
 */
export function saverFromEnv(env: NodeJS.ProcessEnv = process.env): { saver: WaypointCheckpointSaver; store?: TypeOrmCheckpointStore } {
  const backend = env.WAYPOINT_LG_BACKEND ?? 'sqlite';
  if (backend === 'redis') return { saver: new WaypointCheckpointSaver({ redis: { url: env.WAYPOINT_LG_URL, keyPrefix: env.WAYPOINT_LG_SCHEMA } }) };
  const store =
    backend === 'postgres'
      ? new TypeOrmCheckpointStore({ type: 'postgres', url: env.WAYPOINT_LG_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres', schema: env.WAYPOINT_LG_SCHEMA })
      : new TypeOrmCheckpointStore({ type: 'sqlite', path: env.WAYPOINT_LG_DB });
  return { saver: new WaypointCheckpointSaver({ store }), store };
}

async function main(): Promise<void> {
  const [mode, threadId, answer] = process.argv.slice(2);
  const log = process.env.WAYPOINT_LG_CALLS;
  if (!threadId || !log) throw new Error('usage: worker.js report|ask|answer <thread> [json]  (with WAYPOINT_LG_CALLS set)');
  const { saver, store } = saverFromEnv();
  const config = { configurable: { thread_id: threadId } };
  try {
    if (mode === 'report') {
      const graph = reportGraph(saver, log, Number(process.env.WAYPOINT_LG_FILINGS_MS ?? 200));
      // A thread with a checkpoint is resumed from it (input null); a new one starts from the input.
      const resume = (await saver.getTuple(config)) !== undefined;
      console.log(resume ? `resuming thread '${threadId}' from its last checkpoint` : `starting thread '${threadId}'`);
      const state = await graph.invoke(resume ? null : { ticker: 'AAPL' }, config);
      console.log(`RESULT ${JSON.stringify({ brief: state.brief, notes: state.messages.length })}`);
    } else if (mode === 'ask') {
      const state = await approvalGraph(saver, log).invoke({ topic: 'AAPL Q3' }, config);
      const asked = (state as unknown as { __interrupt__?: { value: unknown }[] }).__interrupt__;
      console.log(`INTERRUPT ${JSON.stringify(asked?.[0]?.value ?? null)}`);
    } else if (mode === 'answer' && answer) {
      const state = await approvalGraph(saver, log).invoke(new Command({ resume: JSON.parse(answer) as unknown }), config);
      console.log(`RESULT ${JSON.stringify({ published: state.published, decision: state.decision, draft: state.draft })}`);
    } else {
      throw new Error(`unknown mode '${mode}'`);
    }
  } finally {
    await saver.close();
    await store?.close();
  }
}

if (require.main === module) {
  main().catch((err: unknown) => {
    console.error(err instanceof Error ? err.stack : err);
    process.exit(1);
  });
}
