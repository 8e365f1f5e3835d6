import 'reflect-metadata';
import { strict as assert } from 'node:assert';
import { randomUUID } from 'node:crypto';
import { describe, it } from 'node:test';
import type { ContainerModule } from 'inversify';
import { Redis } from 'ioredis';
import { Waypoint, memoryStorage, postgresStorage, sqliteStorage, type WaypointError } from '../../src/index';
import type { Class } from '../../src/decorators/options';
import { redisStorage } from '../../src/storage/redis/module';
import { assertExit, waypoint as cli } from '../cli/cli-harness';
import { dropSchema, PG_TEST_URL, schemaFor } from '../helpers/pg-schema';
import { tempSqlitePath } from '../helpers/sqlite-temp';
import { syntheticPipeline } from '../helpers/synthetic-pipeline';

/**
 * The run id rule (src/core/run/run-id.ts), the same on every backend: ids with control characters, lone
 * surrogates, edge whitespace or more than 200 characters are refused with INVALID_RUN_ID by every entry
 * point before a store is touched, so no backend stores (or, like PostgreSQL, chokes on) them.
 */

const REDIS_URL = process.env.WAYPOINT_TEST_REDIS_URL ?? 'redis://127.0.0.1:6379';
const Two = syntheticPipeline({ name: 'run-ids', steps: 2, payloadBytes: 5 });

const BAD_IDS: [string, unknown][] = [
  ['NUL', 'a\u0000b'],
  ['newline', 'a\nb'],
  ['DEL', 'a\u007fb'],
  ['NEL (C1)', 'a\u0085b'],
  ['lone high surrogate', 'a\uD800b'],
  ['lone low surrogate', '\uDC00'],
  ['201 characters', 'x'.repeat(201)],
  ['leading space', ' q3'],
  ['trailing tab', 'q3\t'],
  ['empty', ''],
  ['undefined', undefined],
];

interface Backend {
  label: string;
  open(): Promise<{ modules: ContainerModule[]; keys(): Promise<number>; dispose(): Promise<void> }>;
}

const backends: Backend[] = [
  { label: 'memory', open: () => Promise.resolve({ modules: [memoryStorage()], keys: () => Promise.resolve(0), dispose: () => Promise.resolve() }) },
  {
    label: 'sqlite',
    open: () => {
      const { file, remove } = tempSqlitePath();
      return Promise.resolve({ modules: [sqliteStorage({ path: file })], keys: () => Promise.resolve(0), dispose: () => Promise.resolve(remove()) });
    },
  },
  {
    label: 'postgres',
    open: async () => {
      const schema = schemaFor('run-ids');
      await dropSchema(schema);
      return { modules: [postgresStorage({ url: PG_TEST_URL, schema })], keys: () => Promise.resolve(0), dispose: () => dropSchema(schema) };
    },
  },
  {
    label: 'redis',
    open: () => {
      const prefix = `wpt-runids:${randomUUID().slice(0, 8)}:`;
      const admin = new Redis(REDIS_URL);
      const keys = async () => (await admin.keys(`${prefix}*`)).length;
      return Promise.resolve({
        modules: [redisStorage({ url: REDIS_URL, keyPrefix: prefix })],
        keys,
        dispose: async () => {
          const all = await admin.keys(`${prefix}*`);
          if (all.length > 0) await admin.del(...all);
          admin.disconnect();
        },
      });
    },
  },
];

const invalid = (label: string) => (err: WaypointError) => {
  assert.equal(err.code, 'INVALID_RUN_ID', `${label}: ${err.code} ${err.message}`);
  return true;
};

for (const backend of backends) {
  describe(`run ids on ${backend.label}`, () => {
    it('every entry point refuses an invalid run id with INVALID_RUN_ID and stores nothing', async () => {
      const opened = await backend.open();
      const wp = await Waypoint.create({ modules: opened.modules, pipelines: [Two] });
      try {
        await wp.run(Two, { runId: 'good', input: {} });
        const keysBefore = await opened.keys();
        for (const [label, id] of BAD_IDS) {
          const runId = id as string;
          await assert.rejects(wp.run(Two, { runId, input: {} }), invalid(`run ${label}`));
          await assert.rejects(wp.prepare(Two, { runId, input: {} }), invalid(`prepare ${label}`));
          await assert.rejects(wp.resume(runId), invalid(`resume ${label}`));
          await assert.rejects(wp.get(runId), invalid(`get ${label}`));
          await assert.rejects(wp.checkpoint(runId), invalid(`checkpoint ${label}`));
          await assert.rejects(wp.checkpoints(runId), invalid(`checkpoints ${label}`));
          await assert.rejects(wp.cancel(runId), invalid(`cancel ${label}`));
          await assert.rejects(wp.signal(runId, 'go', 1), invalid(`signal ${label}`));
          await assert.rejects(wp.fork(runId, { newRunId: 'f' }), invalid(`fork source ${label}`));
          await assert.rejects(wp.fork('good', { newRunId: runId }), invalid(`fork new id ${label}`));
          await assert.rejects(wp.enqueue(Two, { runId, input: {} }), invalid(`enqueue ${label}`));
        }
        assert.deepEqual(
          (await wp.list()).map((r) => r.runId),
          ['good'],
          'no run row was written for any refused id',
        );
        assert.equal(await opened.keys(), keysBefore, 'no key was written for any refused id');
      } finally {
        await wp.close();
        await opened.dispose();
      }
    });
  });
}

describe('run ids: other entry points', () => {
  it('run(undefined) and a class without @Pipeline are PIPELINE_DEFINITION errors, not TypeErrors', async () => {
    const wp = await Waypoint.create({ modules: [memoryStorage()] });
    try {
      for (const pipeline of [undefined, null, class NotAPipeline {}]) {
        await assert.rejects(
          wp.run(pipeline as unknown as Class, { runId: 'r', input: {} }),
          (err: WaypointError) => err.code === 'PIPELINE_DEFINITION' && /@Pipeline/.test(err.message),
        );
      }
      assert.deepEqual(await wp.list(), []);
    } finally {
      await wp.close();
    }
  });

  it('accepts printable ids: inner spaces, punctuation, non-Latin letters, emoji, 200 characters', async () => {
    const wp = await Waypoint.create({ modules: [memoryStorage()], pipelines: [Two] });
    try {
      for (const runId of ['q3 aapl', 'a/b:{c}', 'отчёт-3', '报告', 'run-🚀', 'y'.repeat(200)]) {
        assert.equal((await wp.run(Two, { runId, input: {} })).status, 'completed', runId);
      }
    } finally {
      await wp.close();
    }
  });

  it('the CLI refuses an invalid run id with exit 2 before opening the store', async () => {
    const { file, remove } = tempSqlitePath();
    try {
      for (const args of [
        ['runs', 'show', 'a\nb'],
        ['runs', 'resume', 'a\u0085b'],
        ['runs', 'cancel', ' x'],
        ['runs', 'fork', 'ok', '--new-id', 'b\u0007'],
        ['verify', 'ok', 'c\u009f'],
      ]) {
        const run = await cli(['--store', `sqlite:${file}`, ...args]);
        assertExit(run, 2, args.join(' '));
        assert.match(run.stderr, /not a valid run id/);
      }
    } finally {
      remove();
    }
  });
});
