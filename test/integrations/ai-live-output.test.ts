import 'reflect-metadata';
import { strict as assert } from 'node:assert';
import { describe, it } from 'node:test';
import type { StoredStreamEvent, Waypoint } from '../../src/index';
import { supportsStreams } from '../../src/contract/run-stream';
import { deserialize } from '../../src/core/state/value-decoder';
import { eachTestOnSqlite } from './ai-sqlite-each';
import { code } from './langgraph-harness';
import { model, Research, scenario, TURNS } from './ai-agent';

/*
 * durableModel and durableTools write live output (issue 37): a streamText tool loop through them emits the
 * model's stream parts and the tools' inputs and outputs as they happen; a replayed call (recorded in the
 * operations log, its first attempt retracted) emits its recorded parts again, so a reader keeps exactly the
 * recorded attempt's parts; { emit: false } emits nothing.
 */
let waypoint: Waypoint;
eachTestOnSqlite((w) => (waypoint = w));

async function streamOf(runId: string): Promise<StoredStreamEvent[]> {
  const store = waypoint.store;
  assert.ok(supportsStreams(store));
  return store.readEvents(runId, 0, 10_000);
}

type Part = { type: string; delta?: string; toolCallId?: string; toolName?: string; output?: unknown };

/** The parts a reader keeps once retractions are applied, decoded. */
function visible(events: readonly StoredStreamEvent[]): Part[] {
  let kept: { step: string; attempt: number; data: string }[] = [];
  for (const event of events) {
    if (event.kind === 'part') kept.push(event);
    else if (event.kind === 'retract') kept = kept.filter((part) => part.step !== event.step || part.attempt !== event.attempt);
  }
  return kept.map((part) => deserialize<Part>(part.data));
}

const text = (parts: Part[]) => parts.flatMap((p) => (p.type === 'text-delta' ? [p.delta] : [])).join('');

describe('waypoint/ai: live output of durableModel and durableTools (SQLite)', () => {
  it('a streamed tool loop emits the model’s parts and each tool’s input and output, in order', async () => {
    const result = await waypoint.run(Research, { runId: 'live-1', input: {} });
    assert.equal(result.status, 'completed');
    const parts = visible(await streamOf('live-1'));
    assert.equal(text(parts), `final answer after ${TURNS - 1} tool calls`);
    const tools = parts.filter((p) => p.type.startsWith('tool-'));
    const calls = Array.from({ length: TURNS - 1 }, (_, i) => `call-${i + 1}`);
    assert.deepEqual(
      tools.map((p) => `${p.type} ${p.toolCallId}`),
      calls.flatMap((id) => [`tool-call ${id}`, `tool-input ${id}`, `tool-output ${id}`]),
    );
    assert.ok(parts.some((p) => p.type === 'finish'));
  });

  it('a replayed loop emits its recorded parts again after the failed attempt’s retraction: a reader keeps one copy', async () => {
    scenario.failAfterLoop = true;
    await assert.rejects(waypoint.run(Research, { runId: 'live-2', input: {} }), code('STEP_FAILED', 'stopped after the loop'));
    scenario.failAfterLoop = false;
    const first = visible(await streamOf('live-2'));
    assert.deepEqual(first, [], 'the failed attempt was retracted');
    const calls = model.doStreamCalls.length;
    assert.equal((await waypoint.resume('live-2')).status, 'completed');
    assert.equal(model.doStreamCalls.length, calls, 'no model call made again');
    const events = await streamOf('live-2');
    const replayed = visible(events);
    assert.equal(text(replayed), `final answer after ${TURNS - 1} tool calls`);
    // Exactly what a run without the failure shows (but the notify tool's idempotency key, which names the run).
    await waypoint.run(Research, { runId: 'live-3', input: {} });
    const unkeyed = (parts: Part[]) => JSON.stringify(parts).replace(/"key":"[0-9a-f]{64}"/g, '"key":"…"');
    assert.equal(unkeyed(replayed), unkeyed(visible(await streamOf('live-3'))));
    assert.deepEqual(
      events.flatMap((e) => (e.kind === 'status' ? [e.status] : [])),
      ['running', 'failed', 'running', 'completed'],
    );
  });

  it('{ emit: false } emits nothing', async () => {
    scenario.emit = false;
    assert.equal((await waypoint.run(Research, { runId: 'quiet', input: {} })).status, 'completed');
    assert.deepEqual(
      (await streamOf('quiet')).map((e) => e.kind),
      ['status', 'status'],
    );
  });
});
