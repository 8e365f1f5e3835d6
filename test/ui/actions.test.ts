import 'reflect-metadata';
import { strict as assert } from 'node:assert';
import { after, before, describe, it } from 'node:test';
import { ContainerModule } from 'inversify';
import { TOKENS, Waypoint, type RunInfo } from '../../src/index';
import { startUiServer, type UiServer } from '../../src/ui';
import type { RunDetailView } from '../../src/ui/run-views';
import { FinancialAnalysis, exampleModule, stepKeys } from '../../examples/financial-analysis/pipeline';
import { killLiveChildren } from '../helpers/child-process';
import { crashAndResume, http, openPostgres, openSqlite, postJson, silentLogger, type ErrorBody, type UiDatabase } from './fixtures';

/** A fork's or cancel's answer (src/ui/actions.ts). */
type RunInfoBody = { run: RunInfo };

const KEYS = stepKeys();

const backends: { name: string; open: () => Promise<UiDatabase> }[] = [
  { name: 'SQLite', open: () => openSqlite() },
  { name: 'PostgreSQL', open: () => openPostgres('actions') },
];

async function until<T>(what: string, read: () => Promise<T>, done: (value: T) => boolean, timeoutMs = 20_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await read();
    if (done(value)) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}: ${JSON.stringify(value)}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

for (const backend of backends) {
  describe(`ui actions on ${backend.name}: fork, resume, cancel through the page's API`, () => {
    let db: UiDatabase;
    let waypoint: Waypoint;
    let ui: UiServer;

    before(async () => {
      db = await backend.open();
      await crashAndResume(db, 'source-run', 3);
      waypoint = await Waypoint.create({
        modules: [
          exampleModule({ outboxPath: db.env.WAYPOINT_OUTBOX!, llm: { delayMs: 1 } }),
          db.storage(),
          new ContainerModule(({ bind }) => void bind(TOKENS.Logger).toConstantValue(silentLogger)),
        ],
      });
      ui = await startUiServer({ store: waypoint.store, waypoint, pipelines: [FinancialAnalysis], allowActions: true, port: 0, logger: silentLogger });
    });

    after(async () => {
      await killLiveChildren();
      await ui?.close();
      await waypoint?.close();
      await db?.dispose();
    });

    it('forks from a step: the copy is paused, its rows marked as copied from the source', async () => {
      const { status, body } = await postJson<RunInfoBody>(ui.url, '/api/runs/source-run/fork', { newRunId: 'forked-run', fromStep: 'ValidationAgent/checkFacts' });
      assert.equal(status, 201);
      assert.deepEqual([body.run.runId, body.run.status, body.run.lastSequence], ['forked-run', 'paused', 6]);
      const detail = (await http<RunDetailView>(ui.url, '/api/runs/forked-run')).body;
      assert.deepEqual(detail.run.forkedFrom, { runId: 'source-run', atSequence: 6 });
      assert.deepEqual(
        detail.steps.map((s) => [s.key, s.origin, s.session]),
        KEYS.slice(0, 6).map((k) => [k, 'copied', 0]),
      );
      assert.equal(detail.sessions, 0);
      assert.deepEqual(detail.actions, { allowed: true, resume: true, cancel: true, fork: true });
    });

    it('resumes the fork in the server process: a fork resume point, the rest executed', async () => {
      const { status, body } = await postJson(ui.url, '/api/runs/forked-run/resume');
      assert.ok(status === 200 || status === 202, `resume answered ${status}: ${JSON.stringify(body)}`);
      const detail = await until(
        'the fork to complete',
        async () => (await http<RunDetailView>(ui.url, '/api/runs/forked-run')).body,
        (d) => d.run.status === 'completed',
      );
      assert.deepEqual(
        detail.steps.map((s) => s.key),
        KEYS,
      );
      assert.deepEqual(
        detail.steps.map((s) => s.origin),
        KEYS.map((_, i) => (i < 6 ? 'copied' : 'executed')),
      );
      assert.deepEqual(
        detail.resumePoints.map((p) => [p.reason, p.afterSequence, p.beforeSequence, p.session]),
        [['fork', 6, 7, 1]],
      );
      assert.equal(detail.integrity.status, 'verified');
      assert.deepEqual(detail.actions, { allowed: true, resume: false, cancel: false, fork: true });
    });

    it('cancels a paused run (idempotently); a finished run cannot be cancelled, a cancelled one not resumed', async () => {
      assert.equal((await postJson(ui.url, '/api/runs/source-run/fork', { newRunId: 'doomed-run', fromSequence: 2 })).status, 201);
      const first = await postJson<RunInfoBody>(ui.url, '/api/runs/doomed-run/cancel', { reason: 'not needed' });
      assert.equal(first.status, 200);
      assert.equal(first.body.run.status, 'cancelled');
      assert.match(first.body.run.resumeHint ?? '', /not needed/);
      const again = await postJson<RunInfoBody>(ui.url, '/api/runs/doomed-run/cancel');
      assert.deepEqual([again.status, again.body.run.status], [200, 'cancelled']);
      const finished = await postJson<ErrorBody>(ui.url, '/api/runs/source-run/cancel');
      assert.deepEqual([finished.status, finished.body.error.code], [409, 'INVALID_TRANSITION']);
      assert.match(finished.body.error.message, /already completed/);
      const resume = await postJson<ErrorBody>(ui.url, '/api/runs/doomed-run/resume');
      assert.deepEqual([resume.status, resume.body.error.code], [409, 'RUN_CANCELLED']);
    });

    it('validates action input: unknown runs, bad bodies, taken ids, unknown steps', async () => {
      const cases: [string, unknown, number, string][] = [
        ['/api/runs/no-such-run/resume', {}, 404, 'RUN_NOT_FOUND'],
        ['/api/runs/no-such-run/cancel', {}, 404, 'RUN_NOT_FOUND'],
        ['/api/runs/no-such-run/fork', { newRunId: 'n1' }, 404, 'RUN_NOT_FOUND'],
        ['/api/runs/source-run/fork', { newRunId: 'forked-run' }, 409, 'RUN_EXISTS'],
        ['/api/runs/source-run/fork', { newRunId: '' }, 400, 'BAD_BODY'],
        ['/api/runs/source-run/fork', {}, 400, 'BAD_BODY'],
        ['/api/runs/source-run/fork', { newRunId: 'n2', fromStep: 'Nope/nothing' }, 400, 'NO_SUCH_STEP'],
        ['/api/runs/source-run/fork', { newRunId: 'n3', fromSequence: 99 }, 404, 'NO_SUCH_CHECKPOINT'],
        ['/api/runs/source-run/fork', { newRunId: 'n4', fromSequence: 1.5 }, 400, 'BAD_BODY'],
        ['/api/runs/source-run/fork', { newRunId: 'n5', fromSequence: 1, fromStep: 'x' }, 400, 'BAD_BODY'],
        ['/api/runs/source-run/fork', { newRunId: 'n6', patch: {} }, 400, 'BAD_BODY'],
        ['/api/runs/source-run/resume', { force: true }, 400, 'BAD_BODY'],
        ['/api/runs/source-run/cancel', { reason: 7 }, 400, 'BAD_BODY'],
      ];
      for (const [path, payload, status, code] of cases) {
        const res = await postJson<ErrorBody>(ui.url, path, payload);
        assert.deepEqual([res.status, res.body.error?.code], [status, code], `${path} ${JSON.stringify(payload)}: ${JSON.stringify(res.body)}`);
      }
      for (const id of ['n1', 'n2', 'n3', 'n4', 'n5', 'n6']) assert.equal(await waypoint.get(id), null, `nothing created for ${id}`);
      const notJson = await http<ErrorBody>(ui.url, '/api/runs/source-run/fork', { method: 'POST', headers: { 'content-type': 'text/plain' }, body: '{"newRunId":"n7"}' });
      assert.deepEqual([notJson.status, notJson.body.error.code], [415, 'UNSUPPORTED_MEDIA_TYPE']);
      const brokenJson = await http<ErrorBody>(ui.url, '/api/runs/source-run/fork', { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{"newRunId":' });
      assert.deepEqual([brokenJson.status, brokenJson.body.error.code], [400, 'BAD_BODY']);
      const huge = await postJson<ErrorBody>(ui.url, '/api/runs/source-run/cancel', { reason: 'x'.repeat(20_000) });
      assert.deepEqual([huge.status, huge.body.error.code], [413, 'PAYLOAD_TOO_LARGE']);
    });

    it('refuses a cross-site POST even though the browser would send its cookie', async () => {
      const res = await postJson<ErrorBody>(ui.url, '/api/runs/source-run/fork', { newRunId: 'n8' }, { origin: 'http://evil.example' });
      assert.deepEqual([res.status, res.body.error.code], [403, 'FORBIDDEN_ORIGIN']);
      const same = await postJson(ui.url, '/api/runs/source-run/fork', { newRunId: 'n9' }, { origin: new URL(ui.url).origin });
      assert.equal(same.status, 201);
      assert.equal(await waypoint.get('n8'), null);
    });
  });
}
