/**
 * Issue 40, the long-runs figure as an interleaved A/B: two builds (`dist` trees of two commits) resume the
 * same recorded runs in alternation (build, size and order swapped every round), so both see the same load.
 * For each: the time from resume() to the first new step's start (as bench/long-runs.ts measures it), the CPU
 * time this process spent in that window (less sensitive to other processes on a loaded machine), and the
 * whole resume call. Runs are recorded by the second build.
 *
 * Usage (from the repository root, after building each commit into its own directory with node_modules beside it):
 *   node scripts/long-resume-ab.mjs <before-dist> <after-dist> <sqlite|postgres> <rounds> <sizes...>
 *   node scripts/long-resume-ab.mjs /tmp/before/dist dist sqlite 9 1000 20000
 */
import 'reflect-metadata';
import path from 'node:path';
const [beforeDist, afterDist, backend, roundsS, ...sizesS] = process.argv.slice(2);
const rounds = Number(roundsS);
const sizes = sizesS.map(Number);
const dists = { before: path.resolve(beforeDist), after: path.resolve(afterDist) };
const mods = {};
for (const [k, d] of Object.entries(dists))
  mods[k] = { env: await import(`${d}/bench/environment.js`), pipe: await import(`${d}/bench/pipeline.js`), idx: await import(`${d}/src/index.js`) };
const envA = new mods.before.env.BenchEnvironment();
const envB = new mods.after.env.BenchEnvironment();
await envA.sweepStale().catch(() => {});
envB.id = envA.id;
envA.sqlitePath('x');
envB.dir = envA.dir;
const hook = { on: null };
function loopPipeline(m) {
  const { Agent, loop, Pipeline, Step } = m.idx;
  class LoopBody extends Agent {
    tick(ctx) {
      const at = (ctx.state.at ?? 0) + 1;
      hook.on?.();
      return { value: 'x'.repeat(1000), at };
    }
  }
  Step()(LoopBody.prototype, 'tick', Object.getOwnPropertyDescriptor(LoopBody.prototype, 'tick'));
  class LongLoop {}
  Pipeline({ name: 'ab-loop', version: '1.0.0', state: m.pipe.BenchState, agents: [loop({ until: () => false, maxIterations: 1_000_000 }, LoopBody)] })(LongLoop);
  return LongLoop;
}
const linePipeline = (m, n) => m.pipe.benchPipeline({ name: `ab_line_${n}`, steps: n + 400, payloadBytes: 1000, state: 'flat', hooks: { onStep: () => hook.on?.() } });
const results = {};
for (const shape of ['line', 'loop']) {
  const ws = {};
  for (const k of ['before', 'after']) {
    const m = mods[k];
    const pipes = sizes.map((n) => (shape === 'loop' ? loopPipeline(m) : linePipeline(m, n)));
    const env = k === 'before' ? envA : envB;
    ws[k] = { bw: await env.waypoint(backend, { name: `ab_${shape}`, options: { pipelines: shape === 'loop' ? [pipes[0]] : pipes } }), pipes };
  }
  for (const [i, n] of sizes.entries()) {
    const runId = `ab-${shape}-${n}`;
    let seen = 0;
    const stop = new AbortController();
    hook.on = () => {
      if (++seen >= n) stop.abort('pause');
    };
    const t = performance.now();
    const r = await ws.after.bw.waypoint.run(ws.after.pipes[i], { runId, input: mods.after.pipe.BENCH_INPUT, signal: stop.signal });
    process.stderr.write(`${backend} ${shape} ${n}: recorded ${r.status} in ${((performance.now() - t) / 1000).toFixed(0)} s\n`);
  }
  for (let round = 0; round < rounds; round++) {
    for (const k of round % 2 ? ['after', 'before'] : ['before', 'after'])
      for (const n of round % 2 ? [...sizes].reverse() : sizes) {
        const runId = `ab-${shape}-${n}`;
        const stop = new AbortController();
        let firstAt = 0;
        let cpuAt = null;
        hook.on = () => {
          if (firstAt === 0) {
            firstAt = performance.now();
            cpuAt = process.cpuUsage(cpu0);
          }
          stop.abort('pause');
        };
        const cpu0 = process.cpuUsage();
        const start = performance.now();
        const r = await ws[k].bw.waypoint.resume(runId, { signal: stop.signal });
        const end = performance.now();
        if (r.status !== 'paused' || firstAt === 0) throw new Error(`${k} ${runId} ${r.status}`);
        const key = `${shape} ${n} ${k}`;
        results[key] ??= { first: [], cpu: [], call: [] };
        results[key].first.push(firstAt - start);
        results[key].cpu.push((cpuAt.user + cpuAt.system) / 1000);
        results[key].call.push(end - start);
      }
  }
  hook.on = null;
}
const med = (a) => {
  const s = [...a].sort((x, y) => x - y);
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
};
console.log(`backend ${backend}, ${rounds} alternating rounds; medians: first new step (wall ms) | CPU ms of this process to first step | whole resume call (ms)`);
for (const shape of ['line', 'loop'])
  for (const k of ['before', 'after']) {
    const row = sizes.map((n) => results[`${shape} ${n} ${k}`]);
    const f = row.map((r) => med(r.first));
    const c = row.map((r) => med(r.cpu));
    const w = row.map((r) => med(r.call));
    console.log(
      `${backend} ${shape} ${k.padEnd(6)} first ${f.map((x) => x.toFixed(1)).join(' / ')} ms (${(f.at(-1) / f[0]).toFixed(2)}x) | cpu ${c.map((x) => x.toFixed(1)).join(' / ')} ms (${(c.at(-1) / c[0]).toFixed(2)}x) | call ${w.map((x) => x.toFixed(0)).join(' / ')} ms (${(w.at(-1) / w[0]).toFixed(2)}x)`,
    );
  }
await envA.cleanup();
await envB.cleanup().catch(() => {});
process.exit(0);
