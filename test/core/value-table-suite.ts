import 'reflect-metadata';
import { strict as assert } from 'node:assert';
import { after, before, describe, it } from 'node:test';
import { ContainerModule } from 'inversify';
import { Agent, Pipeline, Step, TOKENS, Waypoint, WaypointError, type Logger, type StepContext } from '../../src/index';
import { ABSENT, shape, VALUE_TABLE, type ValueCase, type ValueRow } from './value-table';
import type { ValuesBackend } from './values-suite';

const silent: Logger = { debug() {}, info() {}, warn() {}, error() {} };
const quiet = new ContainerModule(({ bind }) => {
  bind(TOKENS.Logger).toConstantValue(silent);
});

/** What `emit` returns, what `read` saw (one entry per execution), and whether `read` stops after reading once. */
const carry = { output: (): Record<string, unknown> => ({}), seen: [] as Record<string, unknown>[], stopAfterRead: false };

class Carrier extends Agent {
  @Step() emit() {
    return carry.output();
  }
  @Step() read(ctx: StepContext<Record<string, unknown>>) {
    const seen: Record<string, unknown> = {};
    for (const key of Object.keys(ctx.state)) seen[key] = ctx.state[key];
    carry.seen.push(seen);
    if (carry.stopAfterRead) {
      carry.stopAfterRead = false;
      throw new Error('stopped after reading, so that a fresh Waypoint resumes from the rows');
    }
    return { read: true };
  }
}

@Pipeline({ name: 'value-table', version: '1.0.0', agents: [Carrier] })
class ValueTablePipeline {}

interface KeyedCase extends ValueCase {
  row: ValueRow;
  /** Row and case index, for state keys and messages. */
  key: string;
}

/** Every case of the rows that are stored, fresh values each call. */
function storedCases(): KeyedCase[] {
  return VALUE_TABLE.flatMap((row, r) => (row.refused ? [] : row.cases().map((c, i) => ({ ...c, row, key: `${r}_${i}` }))));
}

/** What differs between what came back under `prefix` in `got` and what each row promises, one line each. */
function mismatches(where: string, got: Record<string, unknown>, prefix: string): string[] {
  const found: string[] = [];
  for (const c of storedCases()) {
    const key = `${prefix}_${c.key}`;
    const label = `${where}, row ${c.row.value} (case ${c.key})`;
    if (c.expected === ABSENT) {
      if (Object.hasOwn(got, key)) found.push(`${label}: should be left out, came back as ${shape(got[key])}`);
      continue;
    }
    if (!Object.hasOwn(got, key)) {
      found.push(`${label}: the key is missing`);
      continue;
    }
    const back = got[key];
    const expected = 'expected' in c ? c.expected : c.value;
    if (shape(back) !== shape(expected)) found.push(`${label}: came back as ${shape(back)}, expected ${shape(expected)}`);
    try {
      assert.deepStrictEqual(back, expected);
    } catch (error) {
      found.push(`${label}: not deepStrictEqual: ${error instanceof Error ? error.message.slice(0, 300) : String(error)}`);
    }
    const problem = c.row.check?.(back);
    if (problem) found.push(`${label}: ${problem}`);
  }
  return found;
}

function refusedWith(runId: string, what: string, path: string, reason: string) {
  return (err: unknown) => {
    assert.ok(err instanceof WaypointError, `expected a WaypointError, got ${err instanceof Error ? `${err.name}: ${err.message.slice(0, 200)}` : String(err)}`);
    assert.equal(err.code, 'UNSERIALIZABLE_VALUE', err.message);
    for (const f of [what, `run '${runId}'`, ` at ${path}: `, reason]) assert.ok(err.message.includes(f), `message ${JSON.stringify(err.message)} lacks ${JSON.stringify(f)}`);
    return true;
  };
}

/**
 * The table of values (value-table.ts, the one in docs/guarantees.md) on one backend: every stored row
 * as a run's input and as a step's output, seen by a later step live and after a fresh Waypoint resumes
 * from the rows, in the run's result, and read back by that fresh Waypoint; every refused row refused,
 * typed, naming the run, step and path, with nothing stored.
 */
export function defineValueTableSuite(make: () => Promise<ValuesBackend>): void {
  let backend: ValuesBackend;
  let waypoint: Waypoint;
  const open = () => Waypoint.create({ modules: [...backend.modules(), quiet], pipelines: [ValueTablePipeline], ...backend.options });

  describe('the table of values: every row round-trips, or is refused, exactly as docs/guarantees.md says', () => {
    before(async () => {
      backend = await make();
      waypoint = await open();
    });
    after(async () => {
      await waypoint.close();
      await backend.dispose();
    });

    it(`every stored row comes back with its exact class and value: input, step output, the state a later step reads, after a reopen`, async () => {
      const runId = 'value-table';
      const input: Record<string, unknown> = { kept: 'set' };
      for (const c of storedCases()) input[`in_${c.key}`] = c.value;
      carry.output = () => {
        const out: Record<string, unknown> = { kept: undefined };
        for (const c of storedCases()) out[`out_${c.key}`] = c.value;
        return out;
      };
      carry.seen = [];
      carry.stopAfterRead = true;
      await assert.rejects(waypoint.run(ValueTablePipeline, { runId, input }), /stopped after reading/);
      const reader = await open();
      try {
        const result = await reader.resume(runId);
        assert.equal(result.status, 'completed');
        assert.equal(carry.seen.length, 2, 'read ran live, then again on resume');
        const checkpoint = await reader.checkpoint(runId);
        const emitted = checkpoint.completed_steps.find((s) => s.step_name === 'emit')?.output;
        assert.ok(emitted, 'the checkpoint lists the output of emit');
        const views: [string, Record<string, unknown>][] = [
          ['the state a later step read, live', carry.seen[0]],
          ['the state a later step read, resumed by a fresh Waypoint', carry.seen[1]],
          ["the resumed run's result", result.state],
          ['the checkpoint a fresh Waypoint reads', checkpoint.shared_context],
        ];
        const found: string[] = [];
        for (const [where, state] of views) {
          found.push(...mismatches(`input, in ${where}`, state, 'in'), ...mismatches(`step output, in ${where}`, state, 'out'));
          // The emit step returned { kept: undefined }: left out, so the state keeps the input's value.
          if (state.kept !== 'set') found.push(`${where}: { kept: undefined } changed 'kept' to ${shape(state.kept)}`);
        }
        found.push(...mismatches("emit's recorded output, read by a fresh Waypoint", emitted, 'out'));
        assert.deepEqual(found, [], `${found.length} values did not come back as the table says`);
      } finally {
        await reader.close();
      }
    });

    it('every refused row is refused as a step output and as an input, with UNSERIALIZABLE_VALUE naming the run, step and path; nothing is stored', async () => {
      let refused = 0;
      for (const [r, row] of VALUE_TABLE.entries()) {
        if (!row.refused) continue;
        const { reason, below } = row.refused;
        const count = row.cases().length;
        for (let i = 0; i < count; i++) {
          const outRun = `refused-output-${r}-${i}`;
          carry.output = () => ({ value: row.cases()[i].value });
          await assert.rejects(waypoint.run(ValueTablePipeline, { runId: outRun, input: {} }), refusedWith(outRun, "step 'Carrier/emit'", `$.value${below}`, reason));
          assert.deepEqual(await waypoint.store.listSteps(outRun), [], `no step row for ${row.value} (case ${i})`);
          const inRun = `refused-input-${r}-${i}`;
          await assert.rejects(waypoint.run(ValueTablePipeline, { runId: inRun, input: { value: row.cases()[i].value } }), refusedWith(inRun, 'input', `$.value${below}`, reason));
          assert.equal(await waypoint.store.getRun(inRun), null, `no run for the input ${row.value} (case ${i})`);
          refused++;
        }
      }
      assert.ok(refused >= 20, `${refused} refused values tried`);
    });

    it('a run an earlier release started with a hole in its input (stored as null) is the same run when given that input again', async () => {
      const old = { pipelineName: 'value-table', pipelineVersion: '1.0.0', input: '{"list":[1,null,3]}', metadata: '{}' };
      await waypoint.store.createRun({ runId: 'hole-before', ...old });
      await waypoint.store.createRun({ runId: 'hole-before-other', ...old });
      carry.output = () => ({});
      carry.seen = [];
      const result = await waypoint.run(ValueTablePipeline, { runId: 'hole-before', input: { list: [1, , 3] } });
      assert.equal(result.status, 'completed');
      assert.deepStrictEqual(carry.seen[0].list, [1, null, 3], 'the run keeps the input it was started with');
      await assert.rejects(waypoint.run(ValueTablePipeline, { runId: 'hole-before-other', input: { list: [1, 2, 3] } }), (err: unknown) => {
        assert.ok(err instanceof WaypointError && err.code === 'INPUT_MISMATCH', String(err));
        return true;
      });
    });
  });
}
