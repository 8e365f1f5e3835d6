import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { section, us, ratioSpread, type Section } from './report';
import { pairedRatio, summarize } from './stats';

/**
 * Startup (issue 23): what a fresh process pays before Waypoint does anything. Each sample is a new node
 * process, so module loading is measured cold (with the OS file cache warm):
 * - `require` of the package root: modules loaded, time;
 * - a 1-step pipeline on the embedded SQLite store: time from process start to the step being durable, on a
 *   file whose schema is current (a program's usual start: no TypeORM module may load) and on a new file;
 * - the same 1-step pipeline on PostgreSQL, on a schema that is current (made once, before the rounds);
 * - floors in the same rounds: a node process that loads nothing, and one that loads only the packages a
 *   Waypoint user's own code already loads (reflect-metadata, inversify, class-validator) plus
 *   better-sqlite3 opening a file, which no runtime on top of them can go below.
 */
export function startupFigure(options: { quick: boolean; pg: { url: string; schema: string } }, progress: (line: string) => void): Section {
  const rounds = options.quick ? 3 : 9;
  const dir = mkdtempSync(join(tmpdir(), 'waypoint-startup-'));
  const root = require.resolve('../src/index');
  const scripts = {
    empty: `process.stdout.write(JSON.stringify({ ms: performance.now(), modules: Object.keys(require.cache).length }));`,
    floor: `
      require('reflect-metadata'); require('inversify'); require('class-validator');
      const Database = require('better-sqlite3');
      const db = new Database(process.argv[2]); db.pragma('journal_mode = WAL'); db.exec('CREATE TABLE IF NOT EXISTS t (x)'); db.prepare('INSERT INTO t VALUES (1)').run(); db.close();
      process.stdout.write(JSON.stringify({ ms: performance.now(), modules: Object.keys(require.cache).length }));`,
    require: `
      require('reflect-metadata'); const t = performance.now(); require(${JSON.stringify(root)});
      const loaded = Object.keys(require.cache);
      const heavy = loaded.filter((f) => /node_modules\\/(pg|ioredis|pg-boss|bullmq)\\//.test(f)).length;
      process.stdout.write(JSON.stringify({ ms: performance.now(), requireMs: performance.now() - t, modules: loaded.length, heavy }));`,
    firstStep: `
      require('reflect-metadata');
      const { Agent, Step, Pipeline, Waypoint, sqliteStorage } = require(${JSON.stringify(root)});
      class Only extends Agent { async go() { return { done: true }; } }
      Step()(Only.prototype, 'go', Object.getOwnPropertyDescriptor(Only.prototype, 'go'));
      class OneStep {}
      Pipeline({ name: 'one-step', version: '1', agents: [Only] })(OneStep);
      (async () => {
        const waypoint = await Waypoint.create({ modules: [sqliteStorage({ path: process.argv[2] })] });
        await waypoint.run(OneStep, { runId: 'r' + process.pid, input: {} });
        const ms = performance.now();
        await waypoint.close();
        const loaded = Object.keys(require.cache);
        const typeorm = loaded.filter((f) => /node_modules\\/typeorm\\//.test(f)).length;
        process.stdout.write(JSON.stringify({ ms, modules: loaded.length, typeorm }));
      })();`,
    firstStepPg: `
      require('reflect-metadata');
      const { Agent, Step, Pipeline, Waypoint, postgresStorage } = require(${JSON.stringify(root)});
      class Only extends Agent { async go() { return { done: true }; } }
      Step()(Only.prototype, 'go', Object.getOwnPropertyDescriptor(Only.prototype, 'go'));
      class OneStep {}
      Pipeline({ name: 'one-step', version: '1', agents: [Only] })(OneStep);
      (async () => {
        const waypoint = await Waypoint.create({ modules: [postgresStorage({ url: process.argv[2], schema: process.argv[3] })] });
        await waypoint.run(OneStep, { runId: 'r' + process.pid, input: {} });
        const ms = performance.now();
        await waypoint.close();
        const loaded = Object.keys(require.cache);
        const typeorm = loaded.filter((f) => /node_modules\\/typeorm\\//.test(f)).length;
        process.stdout.write(JSON.stringify({ ms, modules: loaded.length, typeorm }));
      })();`,
  };
  // A program's usual start: its database file exists with the schema current (made once, before the rounds).
  // `firstStepNew` is the very first start, on a new file the store must create and migrate.
  const current = join(dir, 'current.db');
  const files = Object.fromEntries(
    Object.entries(scripts).map(([name, text]) => {
      const file = join(dir, `${name}.js`);
      writeFileSync(file, text);
      return [name, file];
    }),
  ) as Record<keyof typeof scripts, string>;
  // The children resolve packages from this repository's node_modules.
  const cwd = join(__dirname, '..', '..');
  const runOnce = (name: keyof typeof scripts, db: string) =>
    JSON.parse(
      execFileSync(process.execPath, [files[name], ...(name === 'firstStepPg' ? [options.pg.url, options.pg.schema] : [db])], {
        cwd,
        env: { ...process.env, NODE_PATH: join(cwd, 'node_modules') },
        encoding: 'utf8',
      }),
    ) as Record<string, number>;
  type Sample = keyof typeof scripts | 'firstStepNew';
  const samples: Record<Sample, Record<string, number>[]> = { empty: [], floor: [], require: [], firstStep: [], firstStepNew: [], firstStepPg: [] };
  try {
    runOnce('firstStep', current);
    runOnce('firstStepPg', ''); // creates and migrates the schema: the rounds start on a current one
    for (let round = 0; round < rounds; round++) {
      progress(`startup: round ${round + 1}/${rounds}`);
      for (const name of Object.keys(scripts) as (keyof typeof scripts)[]) samples[name].push(runOnce(name, name === 'firstStep' ? current : join(dir, `${name}-${round}.db`)));
      samples.firstStepNew.push(runOnce('firstStep', join(dir, `new-${round}.db`)));
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
  const ms = (name: Sample, key = 'ms') => samples[name].map((s) => s[key]);
  const out = section(
    'startup',
    'Startup: a fresh process (SQLite, and one PostgreSQL row)',
    `median of ${rounds} rounds (min–max), each sample a new node process; times from process start (performance.now())`,
    ['what', 'time', 'modules', 'ratio to floor', 'target'],
  );
  const firstStep = summarize(ms('firstStep'));
  const floor = summarize(ms('floor'));
  const vsFloor = pairedRatio(ms('firstStep'), ms('floor'));
  // Issue 40's target: the first step of a fresh process within 60 ms of the floor, paired per round.
  const overFloor = summarize(ms('firstStep').map((v, i) => v - ms('floor')[i]));
  const firstStepNew = summarize(ms('firstStepNew'));
  const typeormModules = Math.max(...ms('firstStep', 'typeorm'));
  const requireMs = summarize(ms('require', 'requireMs'));
  const heavy = Math.max(...ms('require', 'heavy'));
  out.rows.push(['node, nothing loaded', us(summarize(ms('empty')).median * 1000), String(samples.empty[0].modules), '', '']);
  out.rows.push(['floor: reflect-metadata + inversify + class-validator + better-sqlite3 insert', us(floor.median * 1000), String(samples.floor[0].modules), '1.00x', '']);
  out.rows.push([
    `require('waypoint') (root entry)`,
    us(requireMs.median * 1000),
    String(samples.require[0].modules),
    '',
    `no pg/ioredis/pg-boss/BullMQ: ${heavy === 0 ? 'met' : `MISSED (${heavy} modules)`}`,
  ]);
  out.rows.push([
    '1-step SQLite run, process start to step durable (schema current)',
    us(firstStep.median * 1000),
    String(samples.firstStep[0].modules),
    ratioSpread(vsFloor),
    `<= floor + 60 ms: ${overFloor.median <= 60 ? 'met' : 'MISSED'} (+${overFloor.median.toFixed(0)} ms); no TypeORM module: ${typeormModules === 0 ? 'met' : `MISSED (${typeormModules})`}`,
  ]);
  out.rows.push([
    '  the same on a new file (creates and migrates the schema: loads TypeORM)',
    us(firstStepNew.median * 1000),
    String(samples.firstStepNew[0].modules),
    ratioSpread(pairedRatio(ms('firstStepNew'), ms('floor'))),
    '',
  ]);
  const pgTypeorm = Math.max(...ms('firstStepPg', 'typeorm'));
  out.rows.push([
    '1-step PostgreSQL run, process start to step durable (schema current)',
    us(summarize(ms('firstStepPg')).median * 1000),
    String(samples.firstStepPg[0].modules),
    ratioSpread(pairedRatio(ms('firstStepPg'), ms('floor'))),
    `no TypeORM module: ${pgTypeorm === 0 ? 'met' : `MISSED (${pgTypeorm})`}`,
  ]);
  out.notes.push(
    `The floor alone takes ${floor.median.toFixed(0)} ms on this machine: the packages every Waypoint program loads (inversify 8 is an ES module loaded through require, class-validator brings validator and libphonenumber-js). ` +
      'Over it: the runtime. TypeORM (about 300 modules) is loaded only when the schema must be migrated (the new-file row), for a store with entities, or on first use of store.dataSource or a transactional side effect.',
  );
  out.figures = {
    firstStepMs: firstStep,
    firstStepNewFileMs: firstStepNew,
    overFloorMs: overFloor,
    typeormModules,
    firstStepPgMs: summarize(ms('firstStepPg')),
    pgTypeormModules: pgTypeorm,
    floorMs: floor,
    requireMs,
    vsFloor,
    modules: {
      empty: samples.empty[0].modules,
      floor: samples.floor[0].modules,
      require: samples.require[0].modules,
      firstStep: samples.firstStep[0].modules,
      firstStepNewFile: samples.firstStepNew[0].modules,
      firstStepPg: samples.firstStepPg[0].modules,
    },
    heavyModules: heavy,
  };
  return out;
}
