import 'reflect-metadata';
import { strict as assert } from 'node:assert';
import { randomUUID } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { describe, it } from 'node:test';
import type { ContainerModule } from 'inversify';
import { Redis } from 'ioredis';
import { checkSignalName, memoryStorage, postgresStorage, signalNameProblem, sqliteStorage, startUiServer, Waypoint, type StepContext, type WaypointError } from '../../src/index';
import { redisStorage } from '../../src/storage/redis/module';
import { assertExit, waypoint as cli } from '../cli/cli-harness';
import { dropSchema, PG_TEST_URL, schemaFor } from '../helpers/pg-schema';
import { tempSqlitePath } from '../helpers/sqlite-temp';
import { syntheticPipeline } from '../helpers/synthetic-pipeline';
import { postJson, silentLogger, type ErrorBody } from '../ui/fixtures';

/**
 * Issue 34, item 3: one rule for signal names (src/contract/signal-rules.ts) and a payload limit, the same
 * at waypoint.signal(), ctx.waitFor(), the CLI's `runs signal` and the page's signal action, on every
 * backend, refused with a typed error before any store call: nothing stored changes.
 */

const REDIS_URL = process.env.WAYPOINT_TEST_REDIS_URL ?? 'redis://127.0.0.1:6379';

const BAD_NAMES: [string, unknown][] = [
  ['empty', ''],
  ['a number', 42],
  ['null', null],
  ['100,000 characters', 'x'.repeat(100_000)],
  ['129 characters', 'y'.repeat(129)],
  ['NUL', 'go\u0000now'],
  ['newline', 'go\nnow'],
  ['tab', 'go\tnow'],
  ['ESC', '\u001b[31mred'],
  ['DEL', 'go\u007f'],
  ['NEL (C1)', 'go\u0085now'],
  ['lone surrogate', 'go\uD800'],
  ['line separator', 'go\u2028now'],
  ['right-to-left override', 'approve\u202Eevil'],
  ['leading space', ' approval'],
  ['trailing space', 'approval '],
];

const GOOD_NAMES = ['approval', 'review:legal', 'user.reply/2', 'validação', '承認', 'with inner spaces', 'a', 'z'.repeat(128), '🎉'.repeat(128)];

const CLI_BAD = ['empty', '100,000 characters', 'newline', 'ESC', 'right-to-left override', 'leading space'];

/** Over the default limit of 256 KiB once serialized. */
const OVERSIZED = { blob: 'p'.repeat(256 * 1024) };

const received: unknown[] = [];
/** One step that waits for the signal named in the input (so bad names reach ctx.waitFor as given). */
const Waiting = syntheticPipeline({
  name: 'signal-names',
  steps: 2,
  onStep: async (ctx: StepContext, index) => {
    if (index === 0) received.push(await ctx.waitFor((ctx.state as { signalName: string }).signalName));
  },
});

interface Opened {
  /** Fresh modules for each Waypoint (a closed Waypoint closes its store's connection). */
  modules(): ContainerModule[];
  /** The store's URL for the CLI; null for memory (not reachable from another process). */
  url: string | null;
  dispose(): Promise<void>;
}

const backends: { label: string; open(): Promise<Opened> }[] = [
  { label: 'memory', open: () => Promise.resolve({ modules: () => [memoryStorage()], url: null, dispose: () => Promise.resolve() }) },
  {
    label: 'sqlite',
    open: () => {
      const { file, remove } = tempSqlitePath();
      return Promise.resolve({ modules: () => [sqliteStorage({ path: file })], url: `sqlite:${file}`, dispose: () => Promise.resolve(remove()) });
    },
  },
  {
    label: 'postgres',
    open: async () => {
      const schema = schemaFor('signal-names');
      await dropSchema(schema);
      return { modules: () => [postgresStorage({ url: PG_TEST_URL, schema })], url: `${PG_TEST_URL}?schema=${schema}`, dispose: () => dropSchema(schema) };
    },
  },
  {
    label: 'redis',
    open: () => {
      const prefix = `wpt-signals:${randomUUID().slice(0, 8)}:`;
      const dispose = async () => {
        const admin = new Redis(REDIS_URL);
        const all = await admin.keys(`${prefix}*`);
        if (all.length > 0) await admin.del(...all);
        admin.disconnect();
      };
      return Promise.resolve({ modules: () => [redisStorage({ url: REDIS_URL, keyPrefix: prefix })], url: `${REDIS_URL}?prefix=${encodeURIComponent(prefix)}`, dispose });
    },
  },
];

const withCode = (code: string, label: string) => (err: WaypointError) => {
  assert.equal(err.code, code, `${label}: ${err.code} ${err.message}`);
  return true;
};

/** What a refused signal must leave alone: the run row's status and sequence, and its operations. */
async function snapshot(wp: Waypoint, runId: string) {
  const run = await wp.store.getRun(runId);
  const operations = await wp.store.listOperations(runId);
  return { status: run?.status, lastSequence: run?.lastSequence, operations: operations.map((op) => [op.operationKey, op.name, op.state, op.result]) };
}

describe('signal names: the rule', () => {
  it('refuses every bad name with a reason, accepts printable names of any script up to 128 characters', () => {
    for (const [label, name] of BAD_NAMES) assert.notEqual(signalNameProblem(name), null, label);
    for (const name of GOOD_NAMES) assert.equal(signalNameProblem(name), null, name);
    assert.throws(
      () => checkSignalName('go\u0000now', { runId: 'r1', step: 'A/s0' }),
      (err: WaypointError) =>
        err.code === 'INVALID_SIGNAL_NAME' && err.message.includes("'go\\u0000now'") && err.message.includes("step 'A/s0' of run 'r1'") && /U\+0000/.test(err.message),
    );
    assert.throws(
      () => checkSignalName('x'.repeat(100_000)),
      (err: WaypointError) => err.code === 'INVALID_SIGNAL_NAME' && err.message.includes('(100000 characters)') && err.message.length < 1000,
    );
  });
});

describe('signal payloads: the configurable limit', () => {
  it('maxSignalPayloadBytes sets the limit (bytes of serialized JSON); a value that is not a positive integer is refused at create', async () => {
    for (const bad of [0, -1, 1.5, Number.NaN]) {
      await assert.rejects(Waypoint.create({ modules: [memoryStorage()], maxSignalPayloadBytes: bad }), withCode('INVALID_ARGUMENT', String(bad)));
    }
    const wp = await Waypoint.create({ modules: [memoryStorage()], pipelines: [Waiting], maxSignalPayloadBytes: 1000 });
    try {
      await wp.run(Waiting, { runId: 'small', input: { signalName: 'go' } });
      // 'é' is two bytes of UTF-8: 500 of them with the quotes are 1,002 bytes, over 1,000 though only 502 characters.
      await assert.rejects(wp.signal('small', 'go', 'é'.repeat(500)), (err: WaypointError) => err.code === 'SIGNAL_PAYLOAD_TOO_LARGE' && /1002 bytes/.test(err.message));
      assert.deepEqual(await wp.store.listOperations('small').then((ops) => ops.filter((op) => op.name.startsWith('signal:'))), []);
      assert.equal(await wp.signal('small', 'go', 'é'.repeat(499)), true);
    } finally {
      await wp.close();
    }
    const roomy = await Waypoint.create({ modules: [memoryStorage()], pipelines: [Waiting], maxSignalPayloadBytes: 1024 * 1024 });
    try {
      await roomy.run(Waiting, { runId: 'roomy', input: { signalName: 'go' } });
      assert.equal(await roomy.signal('roomy', 'go', OVERSIZED), true);
    } finally {
      await roomy.close();
    }
  });
});

for (const backend of backends) {
  describe(`signal names and payloads on ${backend.label}`, () => {
    it('signal() refuses every bad name and an oversized payload before the store; the run and its operations are unchanged; valid names work end to end', async () => {
      const opened = await backend.open();
      const wp = await Waypoint.create({ modules: opened.modules(), pipelines: [Waiting] });
      try {
        assert.equal((await wp.run(Waiting, { runId: 'w1', input: { signalName: 'approval' } })).status, 'waiting');
        const before = await snapshot(wp, 'w1');
        for (const [label, name] of BAD_NAMES) {
          await assert.rejects(wp.signal('w1', name as string, { ok: true }), withCode('INVALID_SIGNAL_NAME', label));
        }
        await assert.rejects(wp.signal('w1', 'approval', OVERSIZED), (err: WaypointError) => {
          assert.equal(err.code, 'SIGNAL_PAYLOAD_TOO_LARGE', err.message);
          assert.match(err.message, /262144 bytes/);
          return true;
        });
        // A bad name is refused before the run is looked up: an unknown run id gives the name's error.
        await assert.rejects(wp.signal('no-such-run', '', 1), withCode('INVALID_SIGNAL_NAME', 'unknown run'));
        assert.deepEqual(await snapshot(wp, 'w1'), before, 'nothing stored changed');

        received.length = 0;
        assert.equal(await wp.signal('w1', 'approval', { approvedBy: 'dana' }), true);
        assert.equal((await wp.resume('w1')).status, 'completed');
        assert.deepEqual(received, [{ approvedBy: 'dana' }]);
        for (const [i, name] of GOOD_NAMES.entries()) {
          received.length = 0;
          const runId = `good-${i}`;
          assert.equal((await wp.run(Waiting, { runId, input: { signalName: name } })).status, 'waiting', name);
          assert.equal(await wp.signal(runId, name, { i }), true, name);
          assert.equal((await wp.resume(runId)).status, 'completed', name);
          assert.deepEqual(received, [{ i }], name);
        }
        // At the limit exactly is accepted (the figure is bytes of serialized JSON: '"' + 262142 + '"').
        await wp.run(Waiting, { runId: 'at-limit', input: { signalName: 'big' } });
        assert.equal(await wp.signal('at-limit', 'big', 'q'.repeat(256 * 1024 - 2)), true);
      } finally {
        await wp.close();
        await opened.dispose();
      }
    });

    it('ctx.waitFor() with a bad name fails the step with INVALID_SIGNAL_NAME, at once and without retries', async () => {
      const opened = await backend.open();
      const wp = await Waypoint.create({ modules: opened.modules(), pipelines: [Waiting] });
      try {
        for (const [label, name] of BAD_NAMES.filter(([l]) => ['empty', 'a number', '100,000 characters', 'NUL', 'newline', 'ESC'].includes(l))) {
          const runId = `bad-wait-${label.replace(/\W/g, '')}`;
          const failure = await wp.run(Waiting, { runId, input: { signalName: name } }).then(
            (result) => assert.fail(`${label}: the run ended ${result.status}`),
            (err: WaypointError) => err,
          );
          const cause = (failure.cause ?? failure) as WaypointError;
          assert.equal(cause.code, 'INVALID_SIGNAL_NAME', `${label}: ${failure.code} ${failure.message}`);
          const run = await wp.store.getRun(runId);
          assert.equal(run?.status, 'failed', label);
          assert.match(run?.error ?? '', /INVALID_SIGNAL_NAME/, label);
          assert.deepEqual(
            (await wp.store.listOperations(runId)).filter((op) => op.name.startsWith('waypoint:wait') || op.name.startsWith('signal:')),
            [],
            `${label}: no wait record`,
          );
        }
      } finally {
        await wp.close();
        await opened.dispose();
      }
    });

    it("the page's signal action answers 400 / 413 with the typed code and stores nothing; a valid signal is delivered", async () => {
      const opened = await backend.open();
      const wp = await Waypoint.create({ modules: opened.modules(), pipelines: [Waiting] });
      const ui = await startUiServer({ store: wp.store, waypoint: wp, pipelines: [Waiting], allowActions: true, port: 0, logger: silentLogger });
      try {
        await wp.run(Waiting, { runId: 'p1', input: { signalName: 'approval' } });
        const before = await snapshot(wp, 'p1');
        for (const [label, name] of BAD_NAMES) {
          const { status, body } = await postJson<ErrorBody>(ui.url, '/api/runs/p1/signal', { name, payload: 1 });
          assert.equal(status, 400, `${label}: ${JSON.stringify(body).slice(0, 300)}`);
          assert.equal(body.error.code, 'INVALID_SIGNAL_NAME', label);
        }
        const missing = await postJson<ErrorBody>(ui.url, '/api/runs/p1/signal', { payload: 1 });
        assert.deepEqual([missing.status, missing.body.error.code], [400, 'INVALID_SIGNAL_NAME']);
        const big = await postJson<ErrorBody>(ui.url, '/api/runs/p1/signal', { name: 'approval', payload: OVERSIZED });
        assert.deepEqual([big.status, big.body.error.code], [413, 'SIGNAL_PAYLOAD_TOO_LARGE']);
        assert.deepEqual(await snapshot(wp, 'p1'), before, 'nothing stored changed');

        const ok = await postJson<{ delivered: boolean }>(ui.url, '/api/runs/p1/signal', { name: 'approval', payload: { by: 'page' } });
        assert.deepEqual([ok.status, ok.body.delivered], [200, true]);
        const again = await postJson<{ delivered: boolean }>(ui.url, '/api/runs/p1/signal', { name: 'approval', payload: { by: 'twice' } });
        assert.deepEqual([again.status, again.body.delivered], [200, false]);
        received.length = 0;
        assert.equal((await wp.resume('p1')).status, 'completed');
        assert.deepEqual(received, [{ by: 'page' }]);
      } finally {
        await ui.close();
        await wp.close();
        await opened.dispose();
      }
    });

    if (backend.label !== 'memory') {
      it('the CLI refuses bad names and an oversized payload with exit 2 and stores nothing; a valid signal is delivered', async () => {
        const opened = await backend.open();
        const tempDir = tempSqlitePath();
        let wp = await Waypoint.create({ modules: opened.modules(), pipelines: [Waiting] });
        try {
          await wp.run(Waiting, { runId: 'c1', input: { signalName: 'approval' } });
          const before = await snapshot(wp, 'c1');
          await wp.close();
          // argv cannot carry a NUL (nor a non-string); one child process per call, so a sample of the rest.
          for (const [label, name] of BAD_NAMES.filter(([l]) => CLI_BAD.includes(l))) {
            const run = await cli(['--store', opened.url!, 'runs', 'signal', 'c1', name as string, '--payload', '1']);
            assertExit(run, 2, label);
            assert.match(run.stderr, /INVALID_SIGNAL_NAME|is not valid/, label);
          }
          // Over 128 KiB, so through a file: Linux caps one argument at 128 KiB.
          const payloadFile = join(dirname(dirname(tempDir.file)), 'payload.json');
          writeFileSync(payloadFile, JSON.stringify(OVERSIZED));
          const big = await cli(['--store', opened.url!, 'runs', 'signal', 'c1', 'approval', '--payload-file', payloadFile]);
          assertExit(big, 2, 'oversized payload');
          assert.match(big.stderr, /262144 bytes/);
          wp = await Waypoint.create({ modules: opened.modules(), pipelines: [Waiting] });
          assert.deepEqual(await snapshot(wp, 'c1'), before, 'nothing stored changed');
          await wp.close();

          const ok = await cli(['--store', opened.url!, 'runs', 'signal', 'c1', 'approval', '--payload', '{"by":"cli"}']);
          assertExit(ok, 0, 'valid signal');
          wp = await Waypoint.create({ modules: opened.modules(), pipelines: [Waiting] });
          received.length = 0;
          assert.equal((await wp.resume('c1')).status, 'completed');
          assert.deepEqual(received, [{ by: 'cli' }]);
        } finally {
          await wp.close();
          await opened.dispose();
          tempDir.remove();
        }
      });
    }
  });
}
