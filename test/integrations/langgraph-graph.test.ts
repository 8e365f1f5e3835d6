/**
 * Real LangGraph.js graphs on the WaypointCheckpointSaver (SQLite, PostgreSQL, Redis): human-in-the-loop
 * across saver instances, time travel forks that must not leak into each other, and a parallel branch's
 * finished work surviving its sibling's failure.
 */
import { strict as assert } from 'node:assert';
import { describe, it } from 'node:test';
import type { RunnableConfig } from '@langchain/core/runnables';
import { Annotation, Command, END, START, StateGraph, interrupt } from '@langchain/langgraph';
import type { WaypointCheckpointSaver } from '../../src/integrations/langgraph';
import { BACKENDS, type Backend, type SaverFixture, collect, saverFixture } from './langgraph-harness';

/** The `log` channel of a state snapshot (LangGraph types snapshot values loosely). */
const logOf = (snapshot: { values: unknown }) => (snapshot.values as { log: string[] }).log;

const State = Annotation.Root({
  log: Annotation<string[]>({ reducer: (a, b) => a.concat(b), default: () => [] }),
  decision: Annotation<string>(),
});

/** a -> b (asks a human) -> c, recording which nodes ran. */
function approvalGraph(ran: string[]) {
  return new StateGraph(State)
    .addNode('a', () => (ran.push('a'), { log: ['a'] }))
    .addNode('b', () => {
      ran.push('b');
      const decision = interrupt<{ question: string }, string>({ question: 'ship it?' });
      return { log: [`b:${decision}`], decision };
    })
    .addNode('c', () => (ran.push('c'), { log: ['c'] }))
    .addEdge(START, 'a')
    .addEdge('a', 'b')
    .addEdge('b', 'c')
    .addEdge('c', END);
}

/** a -> b -> c, no interrupt. */
function lineGraph(saver: WaypointCheckpointSaver) {
  return new StateGraph(State)
    .addNode('a', () => ({ log: ['a'] }))
    .addNode('b', () => ({ log: ['b'] }))
    .addNode('c', () => ({ log: ['c'] }))
    .addEdge(START, 'a')
    .addEdge('a', 'b')
    .addEdge('b', 'c')
    .addEdge('c', END)
    .compile({ checkpointer: saver });
}

async function withSaver(backend: Backend, name: string, fn: (f: SaverFixture) => Promise<void>): Promise<void> {
  const f = await saverFixture(backend, `graph ${backend} ${name}`);
  try {
    await fn(f);
  } finally {
    await f.close();
  }
}

for (const backend of BACKENDS) {
  describe(`LangGraph graphs on WaypointCheckpointSaver (${backend})`, () => {
    it('interrupt() and Command({ resume }) across two saver instances; finished nodes do not run again', () =>
      withSaver(backend, 'hitl', async (f) => {
        const ran: string[] = [];
        const config = { configurable: { thread_id: 'ticket-1' } };
        const first = (await approvalGraph(ran).compile({ checkpointer: f.saver }).invoke({ log: [] }, config)) as unknown as { __interrupt__: { value: unknown }[] };
        assert.deepEqual(
          first.__interrupt__.map((i) => i.value),
          [{ question: 'ship it?' }],
        );
        assert.deepEqual(ran, ['a', 'b']);
        // Another instance on the same storage, as another process would have.
        const later = approvalGraph(ran).compile({ checkpointer: f.another() });
        assert.deepEqual((await later.getState(config)).next, ['b']);
        const done = await later.invoke(new Command({ resume: 'yes' }), config);
        assert.deepEqual(done, { log: ['a', 'b:yes', 'c'], decision: 'yes' });
        assert.deepEqual(ran, ['a', 'b', 'b', 'c'], "'a' ran once; 'b' re-ran to receive the answer");
      }));

    it('a time-travel fork continues from the past without touching the original branch', () =>
      withSaver(backend, 'fork', async ({ saver }) => {
        const app = lineGraph(saver);
        const config = { configurable: { thread_id: 'story' } };
        await app.invoke({ log: [] }, config);
        const history = await collect(app.getStateHistory(config));
        const original = history[0].config;
        const afterA = history.find((s) => s.next.length === 1 && s.next[0] === 'b')!;
        assert.deepEqual(logOf(afterA), ['a']);
        const forked: RunnableConfig = await app.updateState(afterA.config, { log: ['edited'] });
        const forkFinal = await app.invoke(null, forked);
        assert.deepEqual(forkFinal.log, ['a', 'edited', 'b', 'c']);
        // Both branches wrote the same channel versions; each keeps its own values.
        assert.deepEqual(logOf(await app.getState(original)), ['a', 'b', 'c']);
        assert.deepEqual(logOf(await app.getState(config)), ['a', 'edited', 'b', 'c'], 'the fork is now the latest');
        // A second fork from the same point is independent of the first.
        const second = await app.invoke(null, await app.updateState(afterA.config, { log: ['other'] }));
        assert.deepEqual(second.log, ['a', 'other', 'b', 'c']);
        assert.deepEqual(logOf(await app.getState(original)), ['a', 'b', 'c']);
      }));

    it("a parallel branch's finished work survives its sibling's failure and is not redone", () =>
      withSaver(backend, 'pending writes', async ({ saver }) => {
        const ran: string[] = [];
        let failSlow = true;
        const app = new StateGraph(State)
          .addNode('fast', () => (ran.push('fast'), { log: ['fast'] }))
          .addNode('slow', () => {
            ran.push('slow');
            if (failSlow) throw new Error('provider timeout');
            return { log: ['slow'] };
          })
          .addEdge(START, 'fast')
          .addEdge(START, 'slow')
          .addEdge('fast', END)
          .addEdge('slow', END)
          .compile({ checkpointer: saver });
        const config = { configurable: { thread_id: 'parallel' } };
        await assert.rejects(app.invoke({ log: [] }, config), /provider timeout/);
        failSlow = false;
        const done = await app.invoke(null, config);
        assert.deepEqual(done.log, ['fast', 'slow']);
        assert.deepEqual(ran, ['fast', 'slow', 'slow'], "'fast' ran once: its writes were kept while 'slow' failed");
      }));
  });
}
