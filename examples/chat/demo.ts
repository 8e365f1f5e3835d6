import 'reflect-metadata';
import { resolve } from 'node:path';
import { chooseModel } from '../ai/agent';
import { mockModel } from './assistant';
import { startChatServer } from './server';

/**
 * `npm run demo:chat`: the chat example's server. Prints the page's URL and serves until Ctrl-C. A mock
 * model answers (no network) unless WAYPOINT_AI_PROVIDER / WAYPOINT_AI_MODEL name a real one (as in
 * `npm run demo:ai`). WAYPOINT_CHAT_PORT (default 3000), WAYPOINT_CHAT_DIR (default .waypoint/chat) and
 * WAYPOINT_CHAT_LEASE_MS (default 30000: how soon a restarted server takes over a killed one's turns).
 */
async function main(): Promise<void> {
  let model = mockModel(Number(process.env.WAYPOINT_CHAT_WORD_MS ?? 40));
  let label = 'mock model (no network)';
  if (process.env.WAYPOINT_AI_PROVIDER) {
    const chosen = chooseModel();
    if ('missing' in chosen) {
      console.error(chosen.missing);
      process.exit(2);
    }
    model = chosen.model as typeof model;
    label = chosen.label;
  }
  const server = await startChatServer({
    dataDir: resolve(process.env.WAYPOINT_CHAT_DIR ?? '.waypoint/chat'),
    port: Number(process.env.WAYPOINT_CHAT_PORT ?? 3000),
    model,
    leaseTtlMs: Number(process.env.WAYPOINT_CHAT_LEASE_MS ?? 30_000),
  });
  console.log(`Waypoint chat (${label}) at ${server.url}/  (Ctrl-C stops; ask for a refund to see an approval link)`);
  const stop = () => void server.close().then(() => process.exit(0));
  process.once('SIGINT', stop);
  process.once('SIGTERM', stop);
}

void main();
