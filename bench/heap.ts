import { execFile } from 'node:child_process';
import * as path from 'node:path';
import { getHeapSpaceStatistics } from 'node:v8';
import { serialize, type CheckpointStore } from '../src/index';
import { BenchEnvironment, type Backend } from './environment';
import { BENCH_INPUT, benchPipeline, type StepHooks } from './pipeline';
import { bytes, section, type Section } from './report';
import { slope } from './stats';

/**
 * Figure 6: heap of a 10,000-step run (flat 1 KB state, so the state itself does not grow), sampled
 * after a full GC every 1,000 steps. Runs in a child process started with --expose-gc (this same
 * compiled file tree, found relative to __dirname). On the memory store the stored rows live in the
 * heap too; their size is measured and taken out, so what is left is what the runtime keeps.
 */

export interface HeapResult {
  backend: Backend;
  steps: number;
  /** [step, heapUsed bytes after gc]. */
  samples: [number, number][];
  /** Bytes of step payload written by the run (output + memory + row fields), for scale. */
  writtenBytes: number;
  /** Heap the memory store's rows of this run take: heap after the run minus heap after deleting it (0 for other backends). */
  storeBytes: number;
  /** heapUsed after gc once the run call returned (the executor is gone; the store's rows are not). */
  afterRun: number;
  seconds: number;
}

/** Child side: `--child heap <backend> <steps>`. */
export async function runHeapChild(args: string[]): Promise<HeapResult> {
  const backend = args[0] as Backend;
  const steps = Number(args[1]);
  const gc = (globalThis as { gc?: () => void }).gc;
  if (!gc) throw new Error('the heap child needs --expose-gc');
  const env = new BenchEnvironment();
  try {
    const bw = await env.waypoint(backend, { name: 'heap' });
    const hooks: StepHooks = {};
    const pipeline = benchPipeline({ name: `heap_${backend}`, steps, payloadBytes: 1000, state: 'flat', hooks });
    const samples: [number, number][] = [];
    hooks.onStep = (index) => {
      if (index % 1000 !== 0) return;
      gc();
      samples.push([index, heapUsed()]);
    };
    const start = performance.now();
    const runId = 'heap-run';
    const result = await bw.waypoint.run(pipeline, { runId, input: BENCH_INPUT });
    const seconds = (performance.now() - start) / 1000;
    if (result.status !== 'completed') throw new Error(`heap run ended ${result.status}`);
    const writtenBytes = await bytesWritten(bw.store, runId);
    gc();
    const afterRun = heapUsed();
    let storeBytes = 0;
    if (backend === 'memory') {
      await bw.store.deleteRun(runId);
      gc();
      storeBytes = Math.max(0, afterRun - heapUsed());
    }
    return { backend, steps, samples, writtenBytes, storeBytes, afterRun, seconds };
  } finally {
    await env.cleanup();
  }
}

/**
 * Heap in use outside the code spaces: optimized code compiled as the run warms up is not data the run
 * keeps, and it would otherwise read as a few hundred KB of growth.
 */
function heapUsed(): number {
  return getHeapSpaceStatistics()
    .filter((s) => !s.space_name.startsWith('code'))
    .reduce((sum, s) => sum + s.space_used_size, 0);
}

/** In its own frame, so the loaded copy of the rows is garbage once it returns (an async frame keeps its locals). */
async function bytesWritten(store: CheckpointStore, runId: string): Promise<number> {
  const loaded = (await store.loadRun(runId))!;
  let total = 0;
  for (const row of loaded.steps)
    total += row.output.length + (row.memory?.length ?? 0) + row.checkpointId.length + row.idempotencyKey.length + row.sha256.length + row.agentId.length + row.stepName.length;
  return total;
}

function spawnHeapChild(backend: Backend, steps: number): Promise<HeapResult> {
  const entry = path.join(__dirname, 'index.js');
  return new Promise((resolve, reject) => {
    execFile(process.execPath, ['--expose-gc', entry, '--child', 'heap', backend, String(steps)], { maxBuffer: 16 * 1024 * 1024 }, (error, stdout, stderr) => {
      if (error) return reject(new Error(`heap child (${backend}) failed: ${stderr.trim() || error.message}`));
      try {
        resolve(JSON.parse(stdout.trim().split('\n').pop()!) as HeapResult);
      } catch (parseError) {
        reject(new Error(`heap child (${backend}) printed no result: ${String(parseError)}`));
      }
    });
  });
}

/** Figure 6, from two child processes. @example sections.push(await heapFigure({ quick: false }, log)); */
export async function heapFigure(options: { quick: boolean }, progress: (line: string) => void): Promise<Section> {
  const steps = options.quick ? 3000 : 10_000;
  const out = section(
    'heap',
    `Heap during a ${steps.toLocaleString('en-US')}-step run (flat 1 KB state)`,
    'heap in use (code spaces excluded) after a full GC (--expose-gc, child process) every 1,000 steps; growth = least-squares slope from step 1,000 on; on the memory store the heap its rows take (freed by deleting the run) is subtracted',
    ['backend', 'heap @1000', `heap @${steps - 1000}`, 'after run', 'growth / 1,000 steps', 'store rows / 1,000 steps', 'runtime keeps / step', 'of one state copy', 'target'],
  );
  const stateBytes = serialize({ ...BENCH_INPUT, value: 'x'.repeat(1000), at: steps }).length;
  for (const backend of ['memory', 'sqlite'] as const) {
    progress(`heap: ${backend}, ${steps} steps (child process)`);
    let r: HeapResult;
    try {
      r = await spawnHeapChild(backend, steps);
    } catch (error) {
      out.rows.push([backend, 'failed', String((error as Error).message).slice(0, 120)]);
      continue;
    }
    // The sample at step 0 is before the first checkpoint (statements prepared, metrics created): warm-up.
    const kept = r.samples.filter(([s]) => s > 0);
    const xs = kept.map(([s]) => s);
    const ys = kept.map(([, h]) => h);
    const growth = slope(xs, ys) * 1000;
    const store = (r.storeBytes / r.steps) * 1000;
    const retained = growth - store;
    const perStep = Math.max(0, retained / 1000);
    const fraction = perStep / stateBytes;
    out.rows.push([
      backend,
      bytes(ys[0]),
      bytes(ys[ys.length - 1]),
      bytes(r.afterRun),
      bytes(growth),
      backend === 'memory' ? bytes(store) : '—',
      `${bytes(perStep)}`,
      `${(fraction * 100).toFixed(1)}%`,
      fraction < 0.25 ? 'met (flat)' : `MISSED: keeps ${(fraction * 100).toFixed(0)}% of a state copy per step`,
    ]);
    out.figures[backend] = { ...r, growthPer1000: growth, retainedPerStep: perStep, ofStateCopy: fraction };
  }
  out.notes.push(
    `Target: flat (issue 10: no per-step copies of the state kept alive): met when the runtime keeps < 25% of one state copy (${bytes(stateBytes)} serialized) per step.`,
  );
  out.notes.push('Some KB per 1,000 steps is expected bookkeeping: the completed step keys and one agent instance and container binding per 50 steps.');
  return out;
}
