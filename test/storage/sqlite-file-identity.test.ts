import 'reflect-metadata';
import { strict as assert } from 'node:assert';
import { copyFileSync, renameSync, rmSync } from 'node:fs';
import { describe, it } from 'node:test';
import { ContainerModule } from 'inversify';
import { guardedExecute, sqliteStorage, TOKENS, TypeOrmCheckpointStore, Waypoint, type WaypointError } from '../../src/index';
import { tempSqlitePath } from '../helpers/sqlite-temp';
import { newRun } from '../helpers/store-records';
import { syntheticPipeline } from '../helpers/synthetic-pipeline';

/**
 * A SQLite file deleted or replaced under an open store (issue 34, item 4): SQLite keeps writing into the
 * unlinked inode, so without a check the run "completes" into a file no one can open again and its next
 * run() repeats every step and side effect. The store must stop the run with STORE_UNAVAILABLE naming the
 * file before another step or side effect is recorded.
 */

const silent = {
  debug() {},
  info() {},
  warn() {},
  error() {},
  child() {
    return silent;
  },
};

type Tamper = (file: string) => void;

/** Runs a 20-step pipeline whose every step runs one side effect; `tamper` hits the file in step `at`, before or after its effect. */
async function runWithTamper(tamper: Tamper, at: number, order: 'before-effect' | 'after-effect') {
  const { file, remove } = tempSqlitePath();
  const effects: number[] = [];
  const stepsRun: number[] = [];
  const pipeline = syntheticPipeline({
    name: `file-identity-${order}`,
    steps: 20,
    onStep: async (_ctx, index) => {
      stepsRun.push(index);
      if (index === at && order === 'before-effect') tamper(file);
      await guardedExecute(`effect-${index}`, () => void effects.push(index));
      if (index === at && order === 'after-effect') tamper(file);
    },
  });
  const waypoint = await Waypoint.create({
    modules: [sqliteStorage({ path: file }), new ContainerModule(({ bind }) => void bind(TOKENS.Logger).toConstantValue(silent))],
  });
  try {
    const error = await waypoint.run(pipeline, { runId: 'r1', input: {} }).then(
      (result) => assert.fail(`the run ended ${result.status} into a deleted file`),
      (err: WaypointError) => err,
    );
    return { file, error, effects, stepsRun };
  } finally {
    await waypoint.close().catch(() => undefined);
    remove();
  }
}

const deleteFile: Tamper = (file) => rmSync(file);
const replaceFile: Tamper = (file) => {
  // A restore from a copy: another inode at the same path, with the same content.
  copyFileSync(file, `${file}.copy`);
  renameSync(`${file}.copy`, file);
};
const deleteWal: Tamper = (file) => rmSync(`${file}-wal`);

describe('SQLite: the database file deleted or replaced under a running store', () => {
  for (const [what, tamper, pattern] of [
    ['deleted', deleteFile, /was deleted/],
    ['replaced by a copy', replaceFile, /was replaced by another file/],
  ] as const) {
    it(`file ${what} after step 5's side effect: step 5 is not recorded, no later step or side effect runs`, async () => {
      const { file, error, effects, stepsRun } = await runWithTamper(tamper, 5, 'after-effect');
      assert.equal(error.code, 'STORE_UNAVAILABLE', error.message);
      assert.ok(error.message.includes(`'${file}'`), `the message names the file: ${error.message}`);
      assert.match(error.message, pattern);
      assert.deepEqual(effects, [0, 1, 2, 3, 4, 5]);
      assert.deepEqual(stepsRun, [0, 1, 2, 3, 4, 5], 'no step after the one that found the file gone');
    });

    it(`file ${what} before step 5's side effect: the side effect never runs`, async () => {
      const { error, effects, stepsRun } = await runWithTamper(tamper, 5, 'before-effect');
      assert.equal(error.code, 'STORE_UNAVAILABLE', error.message);
      assert.match(error.message, pattern);
      assert.deepEqual(effects, [0, 1, 2, 3, 4]);
      assert.deepEqual(stepsRun, [0, 1, 2, 3, 4, 5]);
    });
  }

  it("the -wal deleted: the next side effect's record notices, the run stops", async () => {
    const { file, error, effects, stepsRun } = await runWithTamper(deleteWal, 5, 'before-effect');
    assert.equal(error.code, 'STORE_UNAVAILABLE', error.message);
    assert.ok(error.message.includes(`'${file}-wal'`), error.message);
    assert.deepEqual(effects, [0, 1, 2, 3, 4]);
    assert.deepEqual(stepsRun, [0, 1, 2, 3, 4, 5]);
  });

  it('the -wal deleted in a run without side effects: a lease renewal notices, and the next step is not recorded', async () => {
    const { file, remove } = tempSqlitePath();
    let stepsRun = 0;
    let tampered = false;
    const pipeline = syntheticPipeline({
      name: 'file-identity-renewal',
      steps: 400,
      onStep: async (_ctx, index) => {
        stepsRun = index + 1;
        if (index === 2) {
          rmSync(`${file}-wal`);
          tampered = true;
        }
        // Steps that take a little time, so heartbeats (every 5 ms here) fall between them.
        if (tampered) await new Promise((resolve) => setTimeout(resolve, 5));
      },
    });
    const waypoint = await Waypoint.create({
      heartbeatMs: 5,
      modules: [sqliteStorage({ path: file }), new ContainerModule(({ bind }) => void bind(TOKENS.Logger).toConstantValue(silent))],
    });
    try {
      await assert.rejects(waypoint.run(pipeline, { runId: 'r1', input: {} }), (err: WaypointError) => err.code === 'STORE_UNAVAILABLE' && err.message.includes(`'${file}-wal'`));
      assert.ok(stepsRun < 400, `the run stopped after ${stepsRun} of 400 steps`);
    } finally {
      await waypoint.close().catch(() => undefined);
      remove();
    }
  });

  it('the store refuses every write once the file is gone, even after a new database appears at the path', async () => {
    const { file, remove } = tempSqlitePath();
    const store = new TypeOrmCheckpointStore({ type: 'sqlite', path: file });
    const other = new TypeOrmCheckpointStore({ type: 'sqlite', path: file });
    try {
      await store.init();
      await store.createRun(newRun('before'));
      rmSync(file);
      await other.init(); // a new, empty database at the same path
      await assert.rejects(store.createRun(newRun('after')), (err: WaypointError) => err.code === 'STORE_UNAVAILABLE' && err.message.includes(file));
      await assert.rejects(store.setLeaseExpiry('before', 'w', 1, 1000), (err: WaypointError) => err.code === 'STORE_UNAVAILABLE');
      assert.equal(await other.getRun('before'), null);
      assert.equal(await other.getRun('after'), null, 'nothing written after the deletion');
    } finally {
      await store.close();
      await other.close();
      remove();
    }
  });

  it('an untouched file passes every check (a whole run completes)', async () => {
    const { file, remove } = tempSqlitePath();
    const pipeline = syntheticPipeline({ name: 'file-identity-ok', steps: 5, onStep: (_ctx, i) => guardedExecute(`e${i}`, () => i).then(() => undefined) });
    const waypoint = await Waypoint.create({ modules: [sqliteStorage({ path: file }), new ContainerModule(({ bind }) => void bind(TOKENS.Logger).toConstantValue(silent))] });
    try {
      const result = await waypoint.run(pipeline, { runId: 'ok', input: {} });
      assert.equal(result.status, 'completed');
    } finally {
      await waypoint.close();
      remove();
    }
  });
});
