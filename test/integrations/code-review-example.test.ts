/**
 * examples/code-review (every control-flow construct, a child pipeline per customer, emails as a
 * @SideEffect) runs to completion on the memory store and on SQLite with the same, expected final state;
 * `npm run demo:graph` (two SIGKILLs and resumes across processes, on SQLite) passes its own checks.
 */
import 'reflect-metadata';
import { strict as assert } from 'node:assert';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { describe, it } from 'node:test';
import type { ContainerModule } from 'inversify';
import { memoryStorage, sqliteStorage, Waypoint, type StepRecord } from '../../src/index';
import { readCallLog } from '../../examples/code-review/llm';
import { readOutbox } from '../../examples/code-review/outbox';
import { CodeReview, DEMO_INPUT, exampleModule } from '../../examples/code-review/pipeline';
import type { ReviewState } from '../../examples/code-review/state';
import { runDemo } from '../helpers/child-process';
import { tempSqlitePath } from '../helpers/sqlite-temp';

const DEMO = path.resolve(__dirname, '../../examples/code-review/demo.js');
const FILES = [
  'src/auth/session.ts',
  'src/refunds/retry.ts',
  'src/refunds/queue.ts',
  'src/refunds/ledger.ts',
  'src/api/refunds.ts',
  'src/api/errors.ts',
  'test/refunds.test.ts',
  'docs/refunds.md',
];

/**
 * The paths the run records, in order where the order is fixed (the parallel's rows interleave). A step on
 * the run's frame that reaches a reducer (`findings`) has a merge row, and each parallel and forEach a join
 * row (core/flow/join-rows.ts).
 */
const EXPECTED_PATHS = [
  'Planner/plan',
  'Planner/plan#merge',
  'parallel[0]/WebResearch/search',
  'parallel[0]/WebResearch/readPages',
  'parallel[1]/DocsResearch/read',
  'parallel[1]/Summarizer/summarize',
  'parallel[2]/ApiResearch/inspect',
  'parallel#join',
  'loop[0]/CodeGen/generate',
  'loop[0]/Validate/runTests#when',
  'loop[0]/Validate/runTests',
  'loop[0]#until',
  'loop[1]/CodeGen/generate',
  'loop[1]/Validate/runTests#when',
  'loop[1]/Validate/runTests',
  'loop[1]#until',
  'branch',
  'branch[high]/SecurityReview/review',
  'branch[high]/SecurityReview/review#merge',
  'branch[high]/Escalate/notifyOwners',
  'branch[high]/Escalate/pageOnCall',
  'forEach(reviews)',
  ...FILES.map((_, i) => `forEach(reviews)[${i}]/FileReviewer/review`),
  'forEach(reviews)#join',
  'forEach(reports)',
  'forEach(reports)#join',
  'Publisher/publish',
];

const pathOf = (row: StepRecord) => row.path ?? `${row.agentId}/${row.stepName}`;

async function runOn(
  storage: (dir: string) => ContainerModule,
): Promise<{ state: ReviewState; rows: StepRecord[]; children: string[]; calls: number; emails: string[]; executed: number }> {
  const dir = mkdtempSync(path.join(tmpdir(), 'waypoint-code-review-'));
  const outboxPath = path.join(dir, 'outbox.jsonl');
  const logPath = path.join(dir, 'llm.jsonl');
  const waypoint = await Waypoint.create({ modules: [exampleModule({ llm: { delayMs: 5, logPath }, outboxPath }), storage(dir)], pipelines: [CodeReview] });
  try {
    const result = await waypoint.run<ReviewState>(CodeReview, { runId: 'pr-481', input: { ...DEMO_INPUT } });
    assert.equal(result.status, 'completed');
    const rows = await waypoint.store.listSteps('pr-481');
    const children = (await waypoint.list({ parentRunId: 'pr-481' })).filter((c) => c.status === 'completed' && c.pipeline === 'customer-report').map((c) => c.runId);
    const stored = await waypoint.checkpoint('pr-481');
    // The read model (a replay of the rows) gives the state the run returned.
    assert.deepEqual(stored.shared_context, JSON.parse(JSON.stringify(result.state)));
    const emails = readOutbox(outboxPath)
      .filter((e) => e.status === 'delivered')
      .map((e) => e.to);
    return {
      state: JSON.parse(JSON.stringify(result.state)) as ReviewState,
      rows,
      children: children.sort(),
      calls: readCallLog(logPath).filter((c) => c.event === 'start').length,
      emails: emails.sort(),
      executed: result.stepsExecuted,
    };
  } finally {
    await waypoint.close();
    rmSync(dir, { recursive: true, force: true });
  }
}

function assertExpected(run: Awaited<ReturnType<typeof runOn>>, where: string): void {
  const s = run.state;
  assert.deepEqual(s.files, FILES, where);
  // The reducer appended each research branch's finding at the join, in declaration order, then the security review's.
  assert.deepEqual(
    (s.findings ?? []).map((f) => f.split(':')[0]),
    ['plan', 'web', 'docs', 'api', 'security'],
    where,
  );
  assert.ok(s.webNotes && s.docsNotes && s.summary && s.apiNotes, where);
  assert.equal(s.attempts, 2, where);
  assert.equal(s.testsPass, true, where);
  assert.match(s.patch ?? '', /^\/\/ draft 2 \(loop iteration 1\)/, where);
  assert.equal(s.risk, 'high', where);
  assert.equal(s.securityVerdict, 'approve-with-notes', where);
  assert.ok(s.escalation, where);
  assert.equal(s.pagedOnCall, undefined, `${where}: the when-guarded step ran`);
  assert.deepEqual(
    (s.reviews ?? []).map((r) => r.file),
    FILES,
    where,
  );
  assert.ok(
    (s.reviews ?? []).every((r) => (r.verdict === 'approve' || r.verdict === 'comment') && r.comment.length > 0),
    where,
  );
  assert.deepEqual(
    (s.reports ?? []).map((r) => [r.name, r.plan]),
    [
      ['Globex', 'enterprise'],
      ['Initech', 'pro'],
      ['Umbrella', 'free'],
    ],
    where,
  );
  (s.reports ?? []).forEach((r, i) => {
    assert.ok(r.impact, where);
    assert.match(r.report ?? '', new RegExp(`^${r.name} \\(customer ${i + 1}\\): `), where);
  });
  const team = 'team@acme.dev';
  const recipients = [team, 'globex@customers.example.com', 'initech@customers.example.com', 'umbrella@customers.example.com'];
  assert.deepEqual(
    (s.deliveries ?? []).map((d) => d.to),
    recipients,
    where,
  );
  assert.deepEqual(run.emails, [...recipients].sort(), where);
  assert.ok(s.releaseNotes, where);

  assert.deepEqual([...run.rows.map(pathOf)].sort(), [...EXPECTED_PATHS].sort(), where);
  assert.equal(run.rows.find((r) => pathOf(r) === 'branch[high]/Escalate/pageOnCall')?.status, 'skipped', where);
  assert.deepEqual(run.children, ['pr-481/reports/0', 'pr-481/reports/1', 'pr-481/reports/2'], where);
  // 20 LLM-backed parent steps ran (pageOnCall was skipped), plus the Publisher; 2 calls in each of 3 children.
  assert.equal(run.executed, 21, where);
  assert.equal(run.calls, 21 + 6, where);
}

describe('examples/code-review', () => {
  it('runs to completion on the memory store and on SQLite, to the same expected state', async () => {
    const memory = await runOn(() => memoryStorage());
    assertExpected(memory, 'memory');
    const { file, remove } = tempSqlitePath();
    try {
      const sqlite = await runOn(() => sqliteStorage({ path: file }));
      assertExpected(sqlite, 'sqlite');
      assert.deepEqual(sqlite.state, memory.state);
    } finally {
      remove();
    }
  });

  it('npm run demo:graph: two SIGKILLs (mid-parallel, mid-forEach) and resumes pass every check', async () => {
    await runDemo(DEMO, {
      envPrefix: 'WAYPOINT_',
      checks: 9,
      inspect: (out) => {
        assert.match(out, /worker-1 ended by SIGKILL/);
        assert.match(out, /worker-2 ended by SIGKILL/);
        assert.match(out, /All checks passed/);
      },
    });
  });
});
