/**
 * Issue 40, the views' progress read: records one `loop` run on SQLite (one step per iteration, or with
 * `foreach` a forEach of 2 items in each iteration as well), pauses it after N iterations (the executor has
 * taken its resume snapshots) and reads its progress 7 times each way: from every row
 * (`loadRunProgress` without integrity), from the snapshot and the tail (with it), and through
 * `waypoint.get`. Prints the step rows each read took from the store, the median time, and the figure.
 *
 * Usage (from the repository root, after `npx tsc -p tsconfig.json`):
 *   node scripts/view-progress-rows.mjs dist 20000
 *   node scripts/view-progress-rows.mjs dist 3000 foreach
 */
import 'reflect-metadata';
import { rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { createRequire } from 'node:module';

const [distArg = 'dist', iterationsArg = '20000', shape = 'loop'] = process.argv.slice(2);
const dist = path.resolve(distArg);
const N = Number(iterationsArg);
const require = createRequire(import.meta.url);
const { Waypoint, sqliteStorage, Agent, Step, Pipeline, loop, forEach, readPlan } = require(`${dist}/src/index.js`);
const { loadRunProgress } = require(`${dist}/src/core/history/progress-reads.js`);
const { IsOptional } = require('class-validator');

class LoopState {}
for (const key of ['subject', 'at', 'parts']) IsOptional()(LoopState.prototype, key);
const hook = { on: null };
class Tick extends Agent {
  tick(ctx) {
    const at = (ctx.state.at ?? 0) + 1;
    hook.on?.(at);
    return { at };
  }
}
class Part extends Agent {
  check(ctx) {
    return { part: ctx.item };
  }
}
for (const [cls, name] of [
  [Tick, 'tick'],
  [Part, 'check'],
])
  Step()(cls.prototype, name, Object.getOwnPropertyDescriptor(cls.prototype, name));
const body = shape === 'foreach' ? [Tick, forEach(() => ['a', 'b'], Part, { into: 'parts' })] : [Tick];
class Measured {}
Pipeline({ name: 'view-progress', version: '1', state: LoopState, agents: [loop({ until: (s) => (s.at ?? 0) >= N + 10, maxIterations: N + 100 }, ...body)] })(Measured);

const file = path.join(tmpdir(), `view-progress-${process.pid}.db`);
const waypoint = await Waypoint.create({ modules: [sqliteStorage({ path: file })] });
try {
  const stop = new AbortController();
  hook.on = (at) => at >= N && stop.abort('pause');
  let started = performance.now();
  await waypoint.run(Measured, { runId: 'measured', input: { subject: 's' }, signal: stop.signal });
  console.log(`${shape}: recorded ${N} iterations in ${Math.round(performance.now() - started)} ms`);
  const store = waypoint.store;
  let rows = 0;
  const loadRun = store.loadRun.bind(store);
  const listSteps = store.listSteps.bind(store);
  store.loadRun = async (id) => {
    const loaded = await loadRun(id);
    rows += loaded?.steps.length ?? 0;
    return loaded;
  };
  store.listSteps = async (id, range) => {
    const found = await listSteps(id, range);
    rows += found.length;
    return found;
  };
  const run = await store.getRun('measured');
  const plan = readPlan(Measured);
  const reads = [
    ['every row', () => loadRunProgress(store, run, plan)],
    ['snapshot + tail', () => loadRunProgress(store, run, plan, {})],
    ['waypoint.get', async () => (await waypoint.get('measured')).progress],
  ];
  for (const [name, read] of reads) {
    const times = [];
    let progress;
    for (let i = 0; i < 7; i += 1) {
      rows = 0;
      started = performance.now();
      progress = await read();
      times.push(performance.now() - started);
    }
    times.sort((a, b) => a - b);
    console.log(
      `${name}: ${rows} rows, median ${times[3].toFixed(1)} ms (${times[0].toFixed(1)}-${times[6].toFixed(1)}), ${JSON.stringify(progress)} (of ${run.lastSequence} rows)`,
    );
  }
} finally {
  await waypoint.close();
  rmSync(file, { force: true });
}
