/**
 * A reader of a run's live stream in a process of its own: follows run `runId` from offset `from` with the
 * store's readEvents / waitForEvents (not the waypoint.stream API) until a completed, failed or cancelled
 * status, then prints every event it read as one JSON line. It reconnects (opens the store again) after
 * every `reconnectEvery` events when given, reading on from where it stopped.
 *
 *   node dist/test/crash/live-output-reader.js '<LivePlace JSON>' <runId> [from] [reconnectEvery]
 */
import 'reflect-metadata';
import type { StoredStreamEvent } from '../../src/index';
import { supportsStreams } from '../../src/contract/run-stream';
import { openLive, type LivePlace } from './live-output-backends';

const TERMINAL = new Set(['completed', 'failed', 'cancelled']);

async function main(): Promise<void> {
  const [placeJson, runId, fromArg, reconnectArg] = process.argv.slice(2);
  const place = JSON.parse(placeJson) as LivePlace;
  const reconnectEvery = Number(reconnectArg || 0);
  const read: StoredStreamEvent[] = [];
  let from = Number(fromArg || 0);
  let connections = 0;
  process.stdout.write('{"following":true}\n');
  for (let done = false; !done;) {
    const waypoint = await openLive(place);
    connections += 1;
    const store = waypoint.store;
    if (!supportsStreams(store)) throw new Error('the store keeps no streams');
    try {
      for (let sinceConnect = 0; !done && (reconnectEvery === 0 || sinceConnect < reconnectEvery);) {
        const events = await store.readEvents(runId, from, 1_000);
        for (const event of events) {
          read.push(event);
          from = event.offset + 1;
          sinceConnect += 1;
          if (event.kind === 'status' && TERMINAL.has(event.status)) done = true;
        }
        if (!done && events.length === 0 && !(await store.waitForEvents(runId, from, AbortSignal.timeout(60_000)))) throw new Error(`no event after offset ${from} in 60 s`);
      }
    } finally {
      await waypoint.close();
    }
  }
  process.stdout.write(JSON.stringify({ connections, events: read }) + '\n');
}

main().catch((error: unknown) => {
  process.stdout.write(JSON.stringify({ error: error instanceof Error ? (error.stack ?? error.message) : String(error) }) + '\n');
  process.exitCode = 1;
});
