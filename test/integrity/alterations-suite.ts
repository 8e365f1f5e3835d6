import 'reflect-metadata';
import { strict as assert } from 'node:assert';
import { resolve } from 'node:path';
import { after, before, describe, it } from 'node:test';
import type { ContainerModule } from 'inversify';
import { Waypoint, type WaypointError } from '../../src/index';
import type { VerifyReport } from '../../src/cli/commands/verify';
import { waypoint as cli } from '../cli/cli-harness';
import { Alterations, hooks } from './alterations-pipeline';

/** The compiled pipeline module the CLI's `runs resume` loads (next to this file in the output). */
const MODULE = resolve(__dirname, 'alterations-pipeline.js');

/** Every row and key of a test's schema / file / prefix: `text` to compare, `data` to restore. */
export interface Snapshot {
  text: string;
  data: unknown;
}

/** A raw stored value: a string, a number, a boolean, a Date (PostgreSQL timestamps) or null. */
export type RawValue = string | number | boolean | Date | null;

/**
 * One backend as the plain driver sees it (better-sqlite3, pg, ioredis). Step columns are named as the
 * SQL tables name them (run_id, sequence, checkpoint_id, ..., sha256); a Redis backend maps them to its
 * entry fields, and a changed run_id or sequence moves the entry to that run or sequence.
 */
export interface RawBackend {
  name: string;
  /** `--store` URL of the same data. */
  storeUrl: string;
  /** Binds the store in a Waypoint of this process. */
  modules(): ContainerModule[];
  // Each answer may come synchronously (better-sqlite3) or as a promise (ioredis); the suite awaits every one.
  dump(): Snapshot | Promise<Snapshot>;
  restore(snapshot: Snapshot): void | Promise<void>;
  step(runId: string, sequence: number): Record<string, RawValue> | Promise<Record<string, RawValue>>;
  updateStep(runId: string, sequence: number, changes: Record<string, RawValue>): void | Promise<void>;
  deleteStep(runId: string, sequence: number): void | Promise<void>;
  runField(runId: string, column: 'input' | 'pipeline_name'): string | Promise<string>;
  updateRun(runId: string, column: 'input' | 'pipeline_name', value: string): void | Promise<void>;
  dispose(): void | Promise<void>;
}

/** `value` with its last letter or digit changed to the next one of its kind: one changed byte. */
export function flip(value: string): string {
  for (let i = value.length - 1; i >= 0; i--) {
    const c = value[i];
    const next = /[0-8a-yA-Y]/.test(c) ? String.fromCharCode(c.charCodeAt(0) + 1) : c === '9' ? '0' : c === 'z' ? 'a' : c === 'Z' ? 'A' : null;
    if (next !== null) return value.slice(0, i) + next + value.slice(i + 1);
  }
  throw new Error(`nothing to flip in ${JSON.stringify(value)}`);
}

/** The smallest change of a stored value of any type. */
function bump(value: RawValue): RawValue {
  if (typeof value === 'string') return flip(value);
  if (typeof value === 'number') return value + 1;
  if (typeof value === 'boolean') return !value;
  if (value instanceof Date) return new Date(value.getTime() + 1);
  throw new Error('nothing to change in a null value');
}

/** A run the check must report: its id, and the sequences it may name (none: a run-row alteration). */
interface Target {
  runId: string;
  sequences?: number[];
}

interface Case {
  name: string;
  targets: Target[];
  alter(raw: RawBackend): void | Promise<void>;
}

const STEP_COLUMNS = [
  'checkpoint_id',
  'agent_index',
  'agent_id',
  'step_index',
  'step_name',
  'output',
  'memory',
  'idempotency_key',
  'started_at',
  'completed_at',
  'attempt',
  'sha256',
];

async function swap(raw: RawBackend, runId: string, a: number, b: number, columns: string[]): Promise<void> {
  const [rowA, rowB] = [await raw.step(runId, a), await raw.step(runId, b)];
  await raw.updateStep(runId, a, Object.fromEntries(columns.map((c) => [c, rowB[c]!])));
  await raw.updateStep(runId, b, Object.fromEntries(columns.map((c) => [c, rowA[c]!])));
}

/** Every alteration of the issue, each on the run (completed, failed or paused) it is applied to. */
function cases(): Case[] {
  const list: Case[] = [];
  for (const column of STEP_COLUMNS) {
    list.push({
      name: `a changed byte in ${column} of a middle row of a completed run`,
      targets: [{ runId: 'done', sequences: [2] }],
      alter: async (raw) => raw.updateStep('done', 2, { [column]: bump((await raw.step('done', 2))[column]) }),
    });
  }
  list.push(
    {
      name: 'status of a middle row changed to another valid status',
      targets: [{ runId: 'done', sequences: [2] }],
      alter: (raw) => raw.updateStep('done', 2, { status: 'skipped' }),
    },
    {
      name: 'side_effects_committed of a middle row inverted',
      targets: [{ runId: 'done', sequences: [2] }],
      alter: async (raw) => {
        const value = (await raw.step('done', 2)).side_effects_committed!;
        await raw.updateStep('done', 2, { side_effects_committed: typeof value === 'boolean' ? !value : 1 - Number(value) });
      },
    },
    {
      name: 'a non-ASCII character in sha256 of a middle row',
      targets: [{ runId: 'done', sequences: [2] }],
      alter: async (raw) => raw.updateStep('done', 2, { sha256: `${String((await raw.step('done', 2)).sha256).slice(0, -1)}é` }),
    },
    {
      name: 'a non-ASCII character in sha256 of the first row of a paused run',
      targets: [{ runId: 'paused', sequences: [1] }],
      alter: async (raw) => raw.updateStep('paused', 1, { sha256: `é${String((await raw.step('paused', 1)).sha256).slice(1)}` }),
    },
    {
      name: 'a changed byte in the output of the last row of a failed run',
      targets: [{ runId: 'failed', sequences: [2] }],
      alter: async (raw) => raw.updateStep('failed', 2, { output: flip(String((await raw.step('failed', 2)).output)) }),
    },
    {
      name: 'a changed byte in the output of the last row of a paused run',
      targets: [{ runId: 'paused', sequences: [2] }],
      alter: async (raw) => raw.updateStep('paused', 2, { output: flip(String((await raw.step('paused', 2)).output)) }),
    },
    { name: 'the first row of a completed run deleted', targets: [{ runId: 'done', sequences: [1, 2] }], alter: (raw) => raw.deleteStep('done', 1) },
    { name: 'a middle row of a completed run deleted', targets: [{ runId: 'done', sequences: [2, 3] }], alter: (raw) => raw.deleteStep('done', 2) },
    { name: 'the last row of a completed run deleted', targets: [{ runId: 'done', sequences: [3, 4] }], alter: (raw) => raw.deleteStep('done', 4) },
    { name: 'the last row of a failed run deleted', targets: [{ runId: 'failed', sequences: [1, 2] }], alter: (raw) => raw.deleteStep('failed', 2) },
    { name: 'the last row of a paused run deleted', targets: [{ runId: 'paused', sequences: [1, 2] }], alter: (raw) => raw.deleteStep('paused', 2) },
    {
      name: 'the last row of a completed run moved to a failed run (changed run_id)',
      targets: [
        { runId: 'done', sequences: [3, 4] },
        { runId: 'failed', sequences: [3, 4] },
      ],
      alter: (raw) => raw.updateStep('done', 4, { run_id: 'failed' }),
    },
    {
      name: 'the first row of a completed run moved to a run id that has no run',
      targets: [{ runId: 'done2', sequences: [1, 2] }],
      alter: (raw) => raw.updateStep('done2', 1, { run_id: 'nobody' }),
    },
    {
      name: 'two rows swapped: their outputs',
      targets: [{ runId: 'done', sequences: [2, 3] }],
      alter: (raw) => swap(raw, 'done', 2, 3, ['output']),
    },
    {
      name: 'two rows swapped: their whole payloads with their digests (output, memory, sha256)',
      targets: [{ runId: 'done', sequences: [2, 3] }],
      alter: (raw) => swap(raw, 'done', 2, 3, ['output', 'memory', 'sha256']),
    },
    {
      name: 'two rows swapped: their sequences',
      targets: [{ runId: 'done', sequences: [2, 3] }],
      alter: async (raw) => {
        await raw.updateStep('done', 2, { sequence: 1000 });
        await raw.updateStep('done', 3, { sequence: 2 });
        await raw.updateStep('done', 1000, { sequence: 3 });
      },
    },
    {
      name: 'an output transplanted from the same step of another run',
      targets: [{ runId: 'done', sequences: [2] }],
      alter: async (raw) => raw.updateStep('done', 2, { output: (await raw.step('done2', 2)).output! }),
    },
    {
      name: 'a payload transplanted with its digest from the same step of another run (output, memory, sha256)',
      targets: [{ runId: 'done', sequences: [2] }],
      alter: async (raw) => {
        const source = await raw.step('done2', 2);
        await raw.updateStep('done', 2, { output: source.output!, memory: source.memory!, sha256: source.sha256! });
      },
    },
    {
      name: 'an output truncated',
      targets: [{ runId: 'done', sequences: [3] }],
      alter: async (raw) => {
        const output = String((await raw.step('done', 3)).output);
        await raw.updateStep('done', 3, { output: output.slice(0, Math.floor(output.length / 2)) });
      },
    },
    {
      name: 'a sha256 truncated',
      targets: [{ runId: 'done', sequences: [1] }],
      alter: async (raw) => raw.updateStep('done', 1, { sha256: String((await raw.step('done', 1)).sha256).slice(0, 32) }),
    },
    {
      name: "a changed byte in the run row's input (completed run)",
      targets: [{ runId: 'done' }],
      alter: async (raw) => raw.updateRun('done', 'input', flip(await raw.runField('done', 'input'))),
    },
    {
      name: "a changed byte in the run row's input (paused run)",
      targets: [{ runId: 'paused' }],
      alter: async (raw) => raw.updateRun('paused', 'input', flip(await raw.runField('paused', 'input'))),
    },
    {
      name: "a changed byte in the run row's pipeline_name",
      targets: [{ runId: 'done' }],
      alter: async (raw) => raw.updateRun('done', 'pipeline_name', flip(await raw.runField('done', 'pipeline_name'))),
    },
  );
  return list;
}

/** Asserts a typed CHECKPOINT_CORRUPTED naming the run, and one of the target's sequences when it has some. */
function corrupted(target: Target, path: string) {
  return (err: WaypointError & { sequence?: number }) => {
    assert.equal(err.code, 'CHECKPOINT_CORRUPTED', `${path}: expected CHECKPOINT_CORRUPTED, got ${err.code ?? err.name}: ${err.message}`);
    assert.ok(err.message.includes(`'${target.runId}'`), `${path}: the error does not name run '${target.runId}': ${err.message}`);
    if (target.sequences)
      assert.ok(target.sequences.includes(err.sequence!), `${path}: names sequence ${err.sequence}, expected one of ${target.sequences.join(', ')}: ${err.message}`);
    return true;
  };
}

const ALL_RUNS = ['done', 'done2', 'failed', 'paused'];

/**
 * The alteration suite, written once and run per backend (test/integrity/alterations-<backend>.test.ts):
 * real runs are written through the public API (two completed, one failed, one paused), then each case
 * alters stored rows with the plain driver and checks the four paths a user takes: a resume
 * (`waypoint.run`), a load (`waypoint.checkpoints`), `waypoint-durable verify` (exit 4, the run named) and
 * `waypoint-durable runs resume` (exit 4, the run named). Each path starts from the altered store and must leave
 * it byte-for-byte unchanged; the original rows are restored between cases.
 */
export function defineAlterationSuite(open: () => RawBackend | Promise<RawBackend>): void {
  describe('alterations of stored rows', { timeout: 900_000 }, () => {
    let raw: RawBackend;
    let wp: Waypoint;
    let baseline: Snapshot;

    before(async () => {
      raw = await open();
      wp = await Waypoint.create({ modules: raw.modules(), pipelines: [Alterations] });
      for (const runId of ['done', 'done2']) assert.equal((await wp.run(Alterations, { runId, input: { topic: `topic of ${runId}` } })).status, 'completed');
      await assert.rejects(wp.run(Alterations, { runId: 'failed', input: { topic: 'topic of failed' } }), (e: WaypointError) => e.code === 'STEP_FAILED');
      const stop = new AbortController();
      hooks.onStep = (runId, index) => void (runId === 'paused' && index === 1 && stop.abort());
      try {
        assert.equal((await wp.run(Alterations, { runId: 'paused', input: { topic: 'topic of paused' }, signal: stop.signal })).status, 'paused');
      } finally {
        hooks.onStep = undefined;
      }
      // checkpoints() lists sequence 0 (the input) and one checkpoint per recorded step.
      const statuses = await Promise.all(ALL_RUNS.map(async (id) => [id, (await wp.get(id))?.status, (await wp.checkpoints(id)).length]));
      assert.deepEqual(statuses, [
        ['done', 'completed', 5],
        ['done2', 'completed', 5],
        ['failed', 'failed', 3],
        ['paused', 'paused', 3],
      ]);
      baseline = await raw.dump();
    });

    after(async () => {
      await wp?.close();
      await raw?.dispose();
    });

    for (const c of cases()) {
      it(c.name, async () => {
        await raw.restore(baseline);
        await c.alter(raw);
        const altered = await raw.dump();
        assert.notEqual(altered.text, baseline.text, 'the alteration changed the store');
        const failures: string[] = [];
        const check = async (path: string, fn: () => Promise<void>) => {
          await raw.restore(altered);
          try {
            await fn();
          } catch (error) {
            const message = (error instanceof Error ? error.message : String(error)).split('\n')[0];
            failures.push(message.startsWith(path) ? message : `${path}: ${message}`);
          }
          const now = await raw.dump();
          if (now.text !== altered.text) failures.push(`${path}: the store changed (${describeChange(altered.text, now.text)})`);
        };
        for (const target of c.targets) {
          await check(`run('${target.runId}')`, () => assert.rejects(wp.run(Alterations, { runId: target.runId }), corrupted(target, `run('${target.runId}')`)).then(noop));
          await check(`checkpoints('${target.runId}')`, () => assert.rejects(wp.checkpoints(target.runId), corrupted(target, `checkpoints('${target.runId}')`)).then(noop));
          await check(`waypoint-durable runs resume ${target.runId}`, async () => {
            const resumed = await cli(['--store', raw.storeUrl, '--module', MODULE, 'runs', 'resume', target.runId]);
            const what = `waypoint-durable runs resume ${target.runId}: exit ${resumed.code}, stderr ${resumed.stderr.trim() || '(none)'}`;
            assert.equal(resumed.code, 4, what);
            assert.ok(resumed.stderr.includes(`'${target.runId}'`) && /corrupted/.test(resumed.stderr), what);
          });
        }
        await check('waypoint-durable verify', async () => {
          const verified = await cli(['--store', raw.storeUrl, 'verify', '--json']);
          assert.equal(verified.code, 4, `waypoint-durable verify: exit ${verified.code}, stdout ${verified.stdout.trim()}, stderr ${verified.stderr.trim()}`);
          const named = new Set(verified.json<VerifyReport>().corrupted.map((p) => p.runId));
          const expected = c.targets.map((t) => t.runId);
          for (const runId of expected) assert.ok(named.has(runId), `waypoint-durable verify: run '${runId}' not in the report (${[...named].join(', ') || 'none'})`);
          const intact = ALL_RUNS.filter((id) => !expected.includes(id) && named.has(id));
          assert.deepEqual(intact, [], 'waypoint-durable verify: reports runs that were not altered');
        });
        await raw.restore(baseline);
        assert.deepEqual(failures, [], `${c.name}:\n${failures.join('\n')}`);
      });
    }
  });
}

function noop(): void {}

/** Where two dumps first differ: the line's start and the text around the first differing character. */
function describeChange(before: string, after: string): string {
  const a = before.split('\n');
  const b = after.split('\n');
  for (let i = 0; i < Math.max(a.length, b.length); i++) {
    const x = a[i] ?? '(no line)';
    const y = b[i] ?? '(no line)';
    if (x === y) continue;
    let at = 0;
    while (at < x.length && x[at] === y[at]) at++;
    const from = Math.max(0, at - 40);
    return `${x.slice(0, 40)}... ${x.slice(from, at + 60)} -> ${y.slice(from, at + 60)}`;
  }
  return 'same lines';
}
