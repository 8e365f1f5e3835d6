import 'reflect-metadata';
import { strict as assert } from 'node:assert';
import { after, before, describe, it } from 'node:test';
import { ContainerModule } from 'inversify';
import { RetentionManager, SystemClock, TOKENS, Waypoint, WaypointError } from '../../src/index';
import { startUiServer, type UiServer } from '../../src/ui';
import type { RunListView } from '../../src/ui/read-api';
import type { RunDetailView } from '../../src/ui/run-views';
import type { CheckpointView } from '../../src/ui/time-travel';
import { DEMO_INPUT, FinancialAnalysis, exampleModule, stepKeys } from '../../examples/financial-analysis/pipeline';
import { killLiveChildren } from '../helpers/child-process';
import {
  CapturingLogger,
  FlakyPipeline,
  crashAndResume,
  http,
  openPostgres,
  openSqlite,
  postJson,
  runWorker,
  silentLogger,
  type ErrorBody,
  type UiDatabase,
  type Wire,
} from './fixtures';

/** `value` as the API sends it: through JSON. */
const wire = <T>(value: T) => JSON.parse(JSON.stringify(value)) as Wire<T>;

const KEYS = stepKeys();
const CRASH_AFTER = 4;

const backends: { name: string; open: () => Promise<UiDatabase> }[] = [
  { name: 'SQLite', open: () => openSqlite() },
  { name: 'PostgreSQL', open: () => openPostgres('read api') },
];

for (const backend of backends) {
  describe(`ui read API on ${backend.name}, over real runs`, () => {
    let db: UiDatabase;
    let waypoint: Waypoint;
    let ui: UiServer;
    const logger = new CapturingLogger();

    before(async () => {
      db = await backend.open();
      await runWorker(db, 'clean-run');
      await crashAndResume(db, 'crashed-run', CRASH_AFTER);
      waypoint = await Waypoint.create({
        modules: [
          exampleModule({ outboxPath: db.env.WAYPOINT_OUTBOX!, llm: { delayMs: 1 } }),
          db.storage(),
          new ContainerModule(({ bind }) => void bind(TOKENS.Logger).toConstantValue(silentLogger)),
        ],
      });
      await waypoint.run(FlakyPipeline, { runId: 'flaky-run', input: { failWrite: false } });
      await assert.rejects(waypoint.run(FlakyPipeline, { runId: 'broken-run', input: { failWrite: true } }), (e: WaypointError) => e.code === 'STEP_FAILED');
      ui = await startUiServer({ store: waypoint.store, port: 0, pipelines: [FinancialAnalysis, FlakyPipeline], logger });
    });

    after(async () => {
      await killLiveChildren();
      await ui?.close();
      await waypoint?.close();
      await db?.dispose();
    });

    it('lists runs with status, pipeline and version, progress against the plan, started and updated', async () => {
      const { status, body } = await http<RunListView>(ui.url, '/api/runs');
      assert.equal(status, 200);
      const byId = new Map(body.runs.map((r) => [r.runId, r]));
      assert.deepEqual([...byId.keys()].sort(), ['broken-run', 'clean-run', 'crashed-run', 'flaky-run']);
      const crashed = byId.get('crashed-run')!;
      assert.deepEqual(
        { status: crashed.status, pipeline: crashed.pipeline, version: crashed.version, progress: crashed.progress },
        { status: 'completed', pipeline: 'financial-analysis', version: '2.1.0', progress: { done: KEYS.length, total: KEYS.length, basis: 'plan' } },
      );
      assert.ok(Date.parse(crashed.startedAt) <= Date.parse(crashed.updatedAt));
      const broken = byId.get('broken-run')!;
      assert.deepEqual({ status: broken.status, progress: broken.progress }, { status: 'failed', progress: { done: 2, total: 3, basis: 'plan' } });
      assert.equal(broken.error?.code, 'STEP_FAILED');
      assert.match(broken.error?.message ?? '', /disk quota exceeded/);
      assert.equal(body.active, false, 'no run is running or waiting: the page stops refreshing');
      assert.deepEqual(body.pipelines, ['financial-analysis', 'ui-flaky']);
    });

    it('filters by status and pipeline, and limits', async () => {
      const failed = await http<RunListView>(ui.url, '/api/runs?status=failed');
      assert.deepEqual(
        failed.body.runs.map((r) => r.runId),
        ['broken-run'],
      );
      const two = await http<RunListView>(ui.url, '/api/runs?status=failed,completed&pipeline=ui-flaky');
      assert.deepEqual(two.body.runs.map((r) => r.runId).sort(), ['broken-run', 'flaky-run']);
      const one = await http<RunListView>(ui.url, '/api/runs?pipeline=financial-analysis&limit=1');
      assert.equal(one.body.runs.length, 1);
      assert.equal(one.body.limit, 1);
      const none = await http<RunListView>(ui.url, '/api/runs?status=waiting');
      assert.deepEqual(none.body.runs, []);
    });

    it('answers a bad query with 400 and says what is accepted', async () => {
      for (const query of ['status=bogus', 'status=', 'limit=0', 'limit=1001', 'limit=abc', 'pipeline=', 'sort=name', 'status=failed&status=completed']) {
        const { status, body } = await http<ErrorBody>(ui.url, `/api/runs?${query}`);
        assert.equal(status, 400, query);
        assert.equal(body.error.code, 'BAD_QUERY', query);
      }
      const { body } = await http<ErrorBody>(ui.url, '/api/runs?status=bogus');
      assert.match(body.error.message, /running, paused, waiting, completed, failed, cancelled/);
    });

    it('the crashed-and-resumed run: restored steps before the resume point, executed after, side effect committed once', async () => {
      const { status, body } = await http<RunDetailView>(ui.url, '/api/runs/crashed-run');
      assert.equal(status, 200);
      assert.deepEqual(
        body.steps.map((s) => s.key),
        KEYS,
      );
      assert.deepEqual(
        body.steps.map((s) => s.sequence),
        KEYS.map((_, i) => i + 1),
      );
      assert.deepEqual(
        body.steps.map((s) => s.origin),
        KEYS.map((_, i) => (i < CRASH_AFTER ? 'restored' : 'executed')),
      );
      assert.equal(body.sessions, 2);
      assert.equal(body.resumePoints.length, 1);
      const [point] = body.resumePoints;
      assert.deepEqual(
        { after: point.afterSequence, before: point.beforeSequence, step: point.stepKey, reason: point.reason, session: point.session },
        { after: CRASH_AFTER, before: CRASH_AFTER + 1, step: KEYS[CRASH_AFTER], reason: 'gap', session: 2 },
      );
      assert.ok(point.gapMs >= 100, `a process restart leaves an idle gap (${point.gapMs} ms)`);
      for (const s of body.steps) {
        assert.equal(s.durationMs, Date.parse(s.completedAt) - Date.parse(s.startedAt));
        assert.ok(s.durationMs >= 0);
        assert.equal(s.attempt, 1);
      }
      assert.deepEqual(
        body.sideEffects.map((e) => [e.stepKey, e.name, e.state, e.attempts]),
        [['ReportingAgent/deliverReport', 'send-report', 'committed', 1]],
      );
      assert.deepEqual(body.integrity, { status: 'verified', rows: KEYS.length, seal: 'sha256', sequence: null, message: null });
      assert.deepEqual(body.checkpoints, { oldest: 0, latest: KEYS.length });
      assert.equal(body.planKnown, true);
      assert.deepEqual(
        body.agents.map((a) => a.id),
        ['ResearchAgent', 'CodeGenAgent', 'ValidationAgent', 'ReportingAgent'],
      );
      assert.equal(body.run.createdBy.worker, 'ui-worker-crashed-run');
      assert.deepEqual(body.actions, { allowed: false, resume: false, cancel: false, fork: false });
    });

    it('a run that never crashed has one session, every step executed, no resume point', async () => {
      const { body } = await http<RunDetailView>(ui.url, '/api/runs/clean-run');
      assert.equal(body.sessions, 1);
      assert.deepEqual(body.resumePoints, []);
      assert.ok(body.steps.every((s) => s.origin === 'executed' && s.session === 1));
    });

    it('a retried step shows its failed attempt; a failing step shows each attempt and the error', async () => {
      const flaky = (await http<RunDetailView>(ui.url, '/api/runs/flaky-run')).body;
      const fetchStep = flaky.steps.find((s) => s.key === 'FetchAgent/fetch')!;
      assert.deepEqual({ attempt: fetchStep.attempt, retried: fetchStep.retried, origin: fetchStep.origin }, { attempt: 2, retried: true, origin: 'executed' });
      assert.deepEqual(
        flaky.attempts.map((a) => [a.stepKey, a.attempt, a.state, a.error?.message]),
        [['FetchAgent/fetch', 1, 'failed', 'upstream answered 503']],
      );
      assert.deepEqual(flaky.resumePoints, [], 'a retry is not a resume');

      const broken = (await http<RunDetailView>(ui.url, '/api/runs/broken-run')).body;
      assert.equal(broken.run.status, 'failed');
      assert.deepEqual(
        broken.failedSteps.map((f) => [f.key, f.attempts, f.agentIndex, f.stepIndex, f.lastError?.message]),
        [['WriteAgent/write', 2, 1, 0, 'disk quota exceeded']],
      );
      assert.deepEqual(
        broken.attempts.filter((a) => a.stepKey === 'WriteAgent/write').map((a) => a.attempt),
        [1, 2],
      );
      assert.match(broken.run.resumeHint ?? '', /resume/);
    });

    it('time travel: the state at each sequence is the runtime read model at that sequence', async () => {
      for (const sequence of [0, 1, CRASH_AFTER, CRASH_AFTER + 1, KEYS.length]) {
        const { status, body } = await http<CheckpointView>(ui.url, `/api/runs/crashed-run/checkpoints/${sequence}`);
        assert.equal(status, 200, `sequence ${sequence}`);
        const expected = wire(await waypoint.checkpoint('crashed-run', sequence));
        assert.deepEqual(body.checkpoint, expected, `sequence ${sequence}`);
        assert.equal(body.stepKey, sequence === 0 ? null : KEYS[sequence - 1]);
      }
      const input = (await http<CheckpointView>(ui.url, '/api/runs/crashed-run/checkpoints/0')).body.checkpoint;
      assert.deepEqual(input.shared_context, { ...DEMO_INPUT, recipients: [...DEMO_INPUT.recipients] });
      assert.equal(input.completed_steps.length, 0);
    });

    it('unknown runs are 404 with a clear message; bad ids, sequences, paths and methods are refused', async () => {
      const missing = await http<ErrorBody>(ui.url, '/api/runs/no-such-run');
      assert.equal(missing.status, 404);
      assert.equal(missing.body.error.code, 'RUN_NOT_FOUND');
      assert.match(missing.body.error.message, /Run 'no-such-run' is not in this checkpoint store/);
      assert.equal((await http(ui.url, '/api/runs/no-such-run/checkpoints/0')).status, 404);
      assert.equal((await http<ErrorBody>(ui.url, `/api/runs/${'x'.repeat(201)}`)).body.error.code, 'INVALID_RUN_ID');
      assert.equal((await http<ErrorBody>(ui.url, '/api/runs/%E0%A4%A')).body.error.code, 'INVALID_RUN_ID');
      assert.equal((await http<ErrorBody>(ui.url, '/api/runs/a%00b')).body.error.code, 'INVALID_RUN_ID');
      assert.equal((await http<ErrorBody>(ui.url, '/api/runs/a%C2%85b')).body.error.code, 'INVALID_RUN_ID');
      const beyond = await http<ErrorBody>(ui.url, `/api/runs/crashed-run/checkpoints/${KEYS.length + 1}`);
      assert.deepEqual([beyond.status, beyond.body.error.code], [404, 'NO_SUCH_CHECKPOINT']);
      for (const seq of ['abc', '-1', '1.5']) {
        const bad = await http<ErrorBody>(ui.url, `/api/runs/crashed-run/checkpoints/${seq}`);
        assert.deepEqual([bad.status, bad.body.error.code], [400, 'BAD_SEQUENCE'], seq);
      }
      assert.equal((await http(ui.url, '/api/runs/crashed-run?verbose=1')).status, 400);
      assert.equal((await http(ui.url, '/api/nothing')).status, 404);
      const wrongMethod = await http(ui.url, '/api/runs', { method: 'DELETE' });
      assert.deepEqual([wrongMethod.status, wrongMethod.headers.get('allow')], [405, 'GET']);
    });

    it('a corrupted row: integrity names its sequence, the checkpoints before it stay readable', async () => {
      await waypoint.fork('crashed-run', { newRunId: 'tampered-run', fromSequence: 6 });
      await db.corrupt('tampered-run', 3);
      const { body } = await http<RunDetailView>(ui.url, '/api/runs/tampered-run');
      assert.equal(body.integrity.status, 'corrupted');
      assert.equal(body.integrity.sequence, 3);
      assert.match(body.integrity.message ?? '', /run 'tampered-run' at sequence 3 is corrupted/);
      assert.ok(body.steps.every((s) => s.origin === 'copied'));
      assert.deepEqual(body.run.forkedFrom, { runId: 'crashed-run', atSequence: 6 });
      const before = await http<CheckpointView>(ui.url, '/api/runs/tampered-run/checkpoints/2');
      assert.equal(before.status, 200);
      assert.deepEqual(before.body.checkpoint.shared_context, wire(await waypoint.checkpoint('crashed-run', 2)).shared_context);
      const bad = await http<ErrorBody>(ui.url, '/api/runs/tampered-run/checkpoints/3');
      assert.deepEqual([bad.status, bad.body.error.code], [409, 'CHECKPOINT_CORRUPTED']);
    });

    it('rows the runtime writes itself: a retention base bounds time travel, a fork patch is a checkpoint', async () => {
      await waypoint.fork('crashed-run', { newRunId: 'folded-run', fromSequence: KEYS.length });
      const retention = new RetentionManager(waypoint.store, new SystemClock(), {}, { keepLast: 3 });
      assert.equal(await retention.compact('folded-run'), KEYS.length - 3);
      const folded = (await http<RunDetailView>(ui.url, '/api/runs/folded-run')).body;
      const base = KEYS.length - 3;
      assert.deepEqual(
        folded.systemRows.map((r) => [r.sequence, r.kind]),
        [[base, 'base']],
      );
      assert.deepEqual(folded.checkpoints, { oldest: base, latest: KEYS.length });
      assert.deepEqual(
        folded.steps.map((s) => s.sequence),
        [base + 1, base + 2, base + 3],
      );
      assert.equal(folded.integrity.status, 'verified');
      const atBase = await http<CheckpointView>(ui.url, `/api/runs/folded-run/checkpoints/${base}`);
      assert.deepEqual(atBase.body.checkpoint.shared_context, wire(await waypoint.checkpoint('crashed-run', base)).shared_context);
      const archived = await http<ErrorBody>(ui.url, `/api/runs/folded-run/checkpoints/${base - 1}`);
      assert.deepEqual([archived.status, archived.body.error.code], [404, 'NO_SUCH_CHECKPOINT']);
      assert.match(archived.body.error.message, /folded by retention/);

      await waypoint.fork('crashed-run', { newRunId: 'patched-run', fromSequence: 2, patchState: { ticker: 'MSFT' } });
      const patched = (await http<RunDetailView>(ui.url, '/api/runs/patched-run')).body;
      assert.deepEqual(
        patched.systemRows.map((r) => [r.sequence, r.kind]),
        [[3, 'patch']],
      );
      const afterPatch = (await http<CheckpointView>(ui.url, '/api/runs/patched-run/checkpoints/3')).body;
      assert.deepEqual([afterPatch.stepKey, afterPatch.checkpoint.shared_context.ticker], [null, 'MSFT']);
      assert.equal((await http<CheckpointView>(ui.url, '/api/runs/patched-run/checkpoints/2')).body.checkpoint.shared_context.ticker, 'AAPL');
    });

    it('actions are refused with 403 when not enabled', async () => {
      for (const action of ['resume', 'cancel', 'fork', 'signal']) {
        const bodies: Record<string, object> = { fork: { newRunId: 'x' }, signal: { name: 'approval' } };
        const { status, body } = await postJson<ErrorBody>(ui.url, `/api/runs/broken-run/${action}`, bodies[action] ?? {});
        assert.deepEqual([status, body.error.code], [403, 'ACTIONS_DISABLED'], action);
      }
      assert.equal((await http<RunDetailView>(ui.url, '/api/runs/broken-run')).body.run.status, 'failed');
    });

    it('logs method and route pattern only, never a run id or query', async () => {
      await http(ui.url, '/api/runs/crashed-run/checkpoints/2');
      await http(ui.url, '/api/runs?pipeline=ui-flaky');
      const text = JSON.stringify(logger.records);
      for (const secret of ['crashed-run', 'broken-run', 'flaky-run', 'ui-flaky', 'no-such-run']) assert.ok(!text.includes(secret), `log mentions ${secret}`);
      const routes = new Set(logger.records.map((r) => r.fields.route));
      for (const route of ['/api/runs', '/api/runs/:id', '/api/runs/:id/checkpoints/:seq']) assert.ok(routes.has(route), `route ${route} logged`);
      assert.ok(logger.records.every((r) => typeof r.fields.status === 'number' && typeof r.fields.method === 'string'));
    });
  });
}
