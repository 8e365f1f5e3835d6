/**
 * `npm test` entry of LangGraph's own checkpointer conformance suite (@langchain/langgraph-checkpoint-validation,
 * run by vitest, which it is written for) against the WaypointCheckpointSaver on SQLite, PostgreSQL and
 * Redis: one vitest process runs the three spec files in parallel and reports JSON, checked here. Every
 * test of the suite must have run and passed: none skipped, none filtered out.
 */
import { strict as assert } from 'node:assert';
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { after, before, describe, it } from 'node:test';

const REPO = path.resolve(__dirname, '../../..');
const INITIALIZER = path.join(__dirname, 'langgraph-validation-initializer.js');
const VITEST = path.join(path.dirname(require.resolve('vitest/package.json', { paths: [REPO] })), 'vitest.mjs');
/** Tests the suite defines per backend (LangGraph 1.1.1 of the validation package): `validate` + `deltaChannelHistoryTests`. */
const MIN_TESTS_PER_BACKEND = 726;

interface AssertionResult {
  fullName: string;
  status: 'passed' | 'failed' | 'skipped' | 'pending' | 'todo' | 'disabled';
  failureMessages: string[];
}
interface JsonReport {
  success: boolean;
  numTotalTests: number;
  numFailedTests: number;
  numPendingTests: number;
  numTodoTests: number;
  testResults: { name: string; status: string; message: string; assertionResults: AssertionResult[] }[];
}

describe('LangGraph checkpointer conformance suite (@langchain/langgraph-checkpoint-validation)', () => {
  let dir = '';
  let run: { code: number | null; signal: NodeJS.Signals | null; output: string; report: JsonReport | null };

  before(async () => {
    dir = mkdtempSync(path.join(tmpdir(), 'waypoint-lg-vitest-'));
    const reportFile = path.join(dir, 'report.json');
    const child = spawn(process.execPath, [VITEST, 'run', '--config', path.join(REPO, 'vitest.config.mjs'), '--reporter=json', `--outputFile=${reportFile}`], {
      cwd: REPO,
      env: { ...process.env, WAYPOINT_LG_INITIALIZER: INITIALIZER, CI: '1', NO_COLOR: '1' },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let output = '';
    child.stdout.setEncoding('utf8').on('data', (chunk: string) => (output += chunk));
    child.stderr.setEncoding('utf8').on('data', (chunk: string) => (output += chunk));
    const [code, signal] = await new Promise<[number | null, NodeJS.Signals | null]>((resolve, reject) => {
      child.once('error', reject);
      child.once('close', (c, s) => resolve([c, s]));
    });
    let report: JsonReport | null = null;
    try {
      report = JSON.parse(readFileSync(reportFile, 'utf8')) as JsonReport;
    } catch {
      report = null;
    }
    run = { code, signal, output, report };
  });

  after(() => rmSync(dir, { recursive: true, force: true }));

  it('vitest ran the suite and exited 0', () => {
    assert.ok(run.report, `vitest wrote no JSON report (exit ${run.code}, signal ${run.signal}):\n${run.output.slice(-4000)}`);
    assert.equal(run.code, 0, `vitest exited ${run.code}:\n${failures(run.report).slice(0, 4000) || run.output.slice(-4000)}`);
    assert.equal(run.report.success, true);
    assert.equal(run.report.numFailedTests, 0);
    assert.equal(run.report.numPendingTests + run.report.numTodoTests, 0, 'tests were skipped');
    assert.equal(run.report.testResults.length, 3, 'one spec file per backend');
  });

  for (const backend of ['sqlite', 'postgres', 'redis']) {
    it(`every test passed on ${backend}: none skipped, none filtered out`, () => {
      assert.ok(run.report, 'no report');
      const file = run.report.testResults.find((f) => f.name.endsWith(`langgraph-validation-${backend}.vitest.ts`));
      assert.ok(file, `no results for ${backend}`);
      const results = file.assertionResults;
      const notPassed = results.filter((r) => r.status !== 'passed');
      assert.deepEqual(
        notPassed.map((r) => `${r.status}: ${r.fullName}`),
        [],
        `${notPassed.length} of ${results.length} did not pass:\n${notPassed
          .flatMap((r) => r.failureMessages)
          .join('\n')
          .slice(0, 4000)}`,
      );
      assert.ok(results.length >= MIN_TESTS_PER_BACKEND, `only ${results.length} tests ran (expected at least ${MIN_TESTS_PER_BACKEND})`);
      // The five suites of specTest plus the opt-in delta-channel walk all ran.
      for (const suite of ['#put', '#putWrites', '#getTuple', '#list', '#deleteThread', '#getDeltaChannelHistory']) {
        assert.ok(
          results.some((r) => r.fullName.includes(`${suite} `)),
          `suite ${suite} did not run`,
        );
      }
      assert.ok(!results.some((r) => r.fullName.includes('[because ')), 'a test was skipped for this checkpointer');
    });
  }
});

function failures(report: JsonReport | null): string {
  if (!report) return '';
  const failed = report.testResults.flatMap((f) => [
    f.message,
    ...f.assertionResults.filter((r) => r.status === 'failed').map((r) => `${r.fullName}\n${r.failureMessages.join('\n')}`),
  ]);
  return failed.filter(Boolean).join('\n\n');
}
