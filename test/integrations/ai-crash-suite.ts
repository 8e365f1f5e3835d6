import { strict as assert } from 'node:assert';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { after, describe, it } from 'node:test';
import type { ModelCallEvent } from '../../src/index';
import { aiUsageByStep } from '../../src/integrations/ai';
import { buildTimeline } from '../../src/cli/timeline';
import { killLiveChildren, lastJsonLine, spawnNode } from '../helpers/child-process';
import { openWaypoint, readCalls, TURNS, type CallLine, type ResearchState, type StoreSpec } from './ai-agent';

const WORKER = path.resolve(__dirname, 'ai-worker.js');
const RUN = 'research-1';

interface WorkerResult {
  status: string;
  state: ResearchState;
  modelCalls: ModelCallEvent[];
}

async function runWorker(spec: StoreSpec, log: string, env: Record<string, string> = {}) {
  const child = spawnNode(WORKER, [], { AI_STORE: JSON.stringify(spec), AI_RUN_ID: RUN, AI_LOG: log, ...env });
  return child.exited;
}

const turnsOf = (calls: CallLine[], kind: CallLine['kind'], pid?: number) => calls.filter((c) => c.kind === kind && (pid === undefined || c.pid === pid)).map((c) => c.turn);
const range = (from: number, to: number) => Array.from({ length: to - from + 1 }, (_, i) => from + i);
const tokensOfTurns = (turns: number[]) => turns.reduce((sum, t) => sum + 20 + 15 * t, 0);

/**
 * The SIGKILL tests of `waypoint/ai`, for one backend: `fresh(name)` gives a new empty store per test.
 * A child runs the 12-turn loop and kills itself inside a model call or a tool call; a second child
 * resumes; the calls log (written before each call returns) shows what each process paid for.
 */
export function aiCrashSuite(backend: string, fresh: (name: string) => Promise<{ spec: StoreSpec; dispose(): Promise<void> }>): void {
  describe(`waypoint/ai on ${backend}: SIGKILL inside a 12-turn generateText tool loop`, () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'waypoint-ai-'));
    after(async () => {
      await killLiveChildren();
      rmSync(dir, { recursive: true, force: true });
    });

    let reference: WorkerResult | undefined;
    /** The same run, uncrashed, on a store of its own (same run id, so idempotency keys match too). */
    async function uncrashed(): Promise<WorkerResult> {
      if (reference) return reference;
      const store = await fresh(`${backend} ai reference`);
      try {
        const exit = await runWorker(store.spec, path.join(dir, 'reference.log'));
        reference = lastJsonLine<WorkerResult>(exit);
        assert.equal(reference.status, 'completed');
        assert.equal(reference.state.toolResults?.length, TURNS - 1);
        return reference;
      } finally {
        await store.dispose();
      }
    }

    it('killed inside the 7th model call: the resume makes only calls 7-12 and runs only tools 7-11; the result equals an uncrashed run', async () => {
      const expected = await uncrashed();
      const store = await fresh(`${backend} ai kill in model call`);
      const log = path.join(dir, 'model-kill.log');
      try {
        const killed = await runWorker(store.spec, log, { AI_KILL_AT: 'model@7' });
        assert.equal(killed.signal, 'SIGKILL', killed.stderr);
        const first = readCalls(log);
        const firstPid = first[0].pid;
        assert.deepEqual(turnsOf(first, 'model'), range(1, 7), 'the first process died inside call 7');
        assert.deepEqual(turnsOf(first, 'tool'), range(1, 6));

        const resumed = lastJsonLine<WorkerResult>(await runWorker(store.spec, log));
        assert.equal(resumed.status, 'completed');
        const calls = readCalls(log);
        const secondPid = calls.find((c) => c.pid !== firstPid)!.pid;
        assert.deepEqual(turnsOf(calls, 'model', secondPid), range(7, TURNS), 'recorded model calls 1-6 were not made again; only the killed call 7 repeated');
        assert.deepEqual(turnsOf(calls, 'tool', secondPid), range(7, TURNS - 1), 'finished tools 1-6 were not run again');
        assert.deepEqual(resumed.state, expected.state, 'final text, tool results and totalUsage equal those of the uncrashed run');

        const reused = resumed.modelCalls.filter((e) => e.outcome === 'reused');
        assert.equal(reused.length, 6);
        assert.equal(
          reused.reduce((s, e) => s + e.inputTokens, 0),
          tokensOfTurns(range(1, 6)),
          'telemetry reports the tokens the resume saved',
        );
        assert.equal(resumed.modelCalls.filter((e) => e.outcome === 'executed').length, 6);

        // What `waypoint runs show` reads: tokens of the step, and what its completing attempt reused.
        const waypoint = await openWaypoint(store.spec);
        try {
          const loaded = (await waypoint.store.loadRun(RUN))!;
          const operations = await waypoint.store.listOperations(RUN);
          const usage = aiUsageByStep(operations, new Map(loaded.steps.map((r) => [`${r.agentId}/${r.stepName}`, r.startedAt])));
          assert.equal(usage.length, 1);
          assert.deepEqual(usage[0], {
            step: 'Researcher/research',
            modelCalls: TURNS,
            inputTokens: tokensOfTurns(range(1, TURNS)),
            outputTokens: 7 * TURNS,
            toolCalls: TURNS - 1,
            reused: { modelCalls: 6, inputTokens: tokensOfTurns(range(1, 6)), outputTokens: 42, toolCalls: 6 },
          });
          const timeline = buildTimeline(loaded.run, loaded.steps, operations, { integrity: {} });
          assert.deepEqual(timeline.entries.find((e) => e.kind === 'step')?.ai, usage[0]);
        } finally {
          await waypoint.close();
        }
      } finally {
        await store.dispose();
      }
    });

    it('killed inside the 8th tool call (a side effect): the resume repeats only that tool, with the same idempotency key, and no model call', async () => {
      const expected = await uncrashed();
      const store = await fresh(`${backend} ai kill in tool call`);
      const log = path.join(dir, 'tool-kill.log');
      try {
        const killed = await runWorker(store.spec, log, { AI_KILL_AT: 'tool@8' });
        assert.equal(killed.signal, 'SIGKILL', killed.stderr);
        const first = readCalls(log);
        const firstPid = first[0].pid;
        assert.deepEqual(turnsOf(first, 'model'), range(1, 8));
        assert.deepEqual(turnsOf(first, 'tool'), range(1, 8), 'the first process died inside tool call 8');

        const resumed = lastJsonLine<WorkerResult>(await runWorker(store.spec, log));
        assert.equal(resumed.status, 'completed');
        const calls = readCalls(log);
        const secondPid = calls.find((c) => c.pid !== firstPid)!.pid;
        assert.deepEqual(turnsOf(calls, 'model', secondPid), range(9, TURNS), 'model calls 1-8 were recorded: none made again');
        assert.deepEqual(turnsOf(calls, 'tool', secondPid), range(8, TURNS - 1), 'only the killed tool call repeated');
        const notify8 = calls.filter((c) => c.tool === 'notify' && c.turn === 8);
        assert.equal(notify8.length, 2);
        assert.equal(notify8[0].key, notify8[1].key, 'the repeated side effect carries the same idempotency key');
        assert.deepEqual(resumed.state, expected.state);
      } finally {
        await store.dispose();
      }
    });

    it('a tool that threw (a 503, after doing its work) and a kill after the loop: the resume replays the error, runs no tool and calls no model', async () => {
      const store = await fresh(`${backend} ai tool error then kill`);
      const log = path.join(dir, 'tool-error-kill.log');
      try {
        const killed = await runWorker(store.spec, log, { AI_FLAKY_TURN: '3', AI_KILL_AT: 'after-loop' });
        assert.equal(killed.signal, 'SIGKILL', killed.stderr);
        const first = readCalls(log);
        assert.deepEqual(turnsOf(first, 'model'), range(1, TURNS), 'the loop finished before the kill');
        assert.deepEqual(
          first.filter((c) => c.tool === 'flaky').map((c) => c.turn),
          [3],
          'the flaky tool ran once, and threw',
        );

        const exit = await runWorker(store.spec, log, { AI_FLAKY_TURN: '3' });
        const resumed = lastJsonLine<WorkerResult>(exit);
        assert.equal(resumed.status, 'completed', exit.stderr);
        assert.deepEqual(readCalls(log).slice(first.length), [], 'no model call and no tool run on resume: the flaky tool was not run again');
        assert.equal(resumed.state.answer, `final answer after ${TURNS - 1} tool calls`);
        assert.deepEqual(resumed.state.toolErrors, ['Error: upstream 503 for q3'], 'the step saw the recorded error, as the model did');
        assert.equal(resumed.state.toolResults?.length, TURNS - 2);
      } finally {
        await store.dispose();
      }
    });
  });
}
