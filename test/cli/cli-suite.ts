import { strict as assert } from 'node:assert';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { readOutbox } from '../../examples/financial-analysis/mailer';
import { stepKeys } from '../../examples/financial-analysis/pipeline';
import { killLiveChildren } from '../helpers/child-process';
import { FIXTURE_MODULE, assertExit, assertOneLineError, completeWorker, crashWorker, waypoint } from './cli-harness';

/** A database the CLI suite fills with real runs and reads with the binary. */
export interface CliDatabase {
  /** The `--store` URL. */
  storeUrl: string;
  /** Environment pointing the example worker at the same database. */
  workerEnv: Record<string, string | undefined>;
  /** Flips one character of the stored output of a step row, with SQL, behind Waypoint's back. */
  flipByte(runId: string, sequence: number): Promise<void>;
  dispose(): Promise<void>;
}

export interface CliBackend {
  name: string;
  open(dir: string): Promise<CliDatabase>;
}

interface ListedRun {
  runId: string;
  status: string;
  lastSequence: number;
  stale: boolean;
}

interface ShownRun {
  run: { runId: string; status: string; lastSequence: number };
  timeline: {
    entries: {
      sequence: number;
      step: string;
      attempt: number;
      durationMs: number;
      sideEffects: { name: string; state: string; attempts: number }[];
      resumedBefore: { gapMs: number } | null;
      corrupted: string | null;
    }[];
    pending: { step: string; next: boolean }[];
    resumes: number;
    leaseEpoch: number;
  };
}

/**
 * The CLI against one backend, written once (test/cli/cli-<backend>.test.ts runs it): the example
 * pipeline fills the store for real (a completed run, a run crashed with SIGKILL after its 4th checkpoint
 * and resumed by a second process, and a run crashed after its 2nd and left), then the compiled binary
 * is run as a child process and its tables, JSON and exit codes are checked.
 */
export function defineCliSuite(backend: CliBackend): void {
  describe(`waypoint CLI on ${backend.name}`, { timeout: 300_000 }, () => {
    const keys = stepKeys();
    let dir: string;
    let db: CliDatabase;
    let env: Record<string, string | undefined>;
    const cli = (...args: string[]) => waypoint(['--store', db.storeUrl, ...args], env);

    before(async () => {
      dir = mkdtempSync(join(tmpdir(), 'waypoint-cli-'));
      db = await backend.open(dir);
      env = { ...db.workerEnv, WAYPOINT_OUTBOX: join(dir, 'outbox.jsonl'), WAYPOINT_LLM_DELAY_MS: '2', WAYPOINT_LEASE_TTL_MS: '1000' };
      await Promise.all([
        completeWorker('done', env),
        crashWorker('crashed', 'after-checkpoint-before-next-step@4', env),
        crashWorker('stuck', 'after-checkpoint-before-next-step@2', env),
      ]);
      await completeWorker('crashed', env);
    });

    after(async () => {
      await killLiveChildren();
      await db?.dispose();
      if (dir) rmSync(dir, { recursive: true, force: true });
    });

    it('runs list: a table of every run, JSON with the same runs, filters by status and staleness', async () => {
      const table = await cli('runs', 'list');
      assertExit(table, 0, 'runs list');
      const lines = table.stdout.trim().split('\n');
      assert.match(lines[0], /^RUN\s+PIPELINE\s+STATUS\s+SEQ\s+STEPS\s+UPDATED\s+NOTE$/);
      assert.equal(lines.length, 4);
      assert.match(table.stdout, /^done\s+financial-analysis@2\.1\.0\s+completed\s+11\s+11\/11 steps\s/m);
      assert.match(table.stdout, /^crashed\s+financial-analysis@2\.1\.0\s+completed\s+11\s/m);
      // Without --module the rows alone: no total before the run completes.
      assert.match(table.stdout, /^stuck\s+financial-analysis@2\.1\.0\s+running \(stale\)\s+2\s+2\/\? steps\s/m);

      const listed = (await cli('runs', 'list', '--json')).json<ListedRun[]>();
      assert.deepEqual(listed.map((r) => [r.runId, r.status, r.lastSequence]).sort(), [
        ['crashed', 'completed', 11],
        ['done', 'completed', 11],
        ['stuck', 'running', 2],
      ]);
      const completed = (await cli('runs', 'list', '--status', 'completed', '--json')).json<ListedRun[]>();
      assert.deepEqual(completed.map((r) => r.runId).sort(), ['crashed', 'done']);
      const limited = await cli('runs', 'list', '--limit', '1', '--json');
      assert.equal(limited.json<ListedRun[]>().length, 1);

      // The stuck run's worker process on this host is gone, so the run is stale before its lease expires.
      const stale = (await cli('runs', 'list', '--stale', '--json')).json<ListedRun[]>();
      assert.deepEqual(
        stale.map((r) => [r.runId, r.stale]),
        [['stuck', true]],
      );
    });

    it("runs show: the crashed run's timeline marks the resume after sequence 4, with durations, attempts and the side effect", async () => {
      const human = await cli('runs', 'show', 'crashed');
      assertExit(human, 0, 'runs show');
      assert.match(human.stdout, /^Run crashed: financial-analysis@2\.1\.0, completed$/m);
      const lines = human.stdout.split('\n');
      const marker = lines.findIndex((l) => l.includes('-- resumed:'));
      assert.ok(marker > 0, `no resume marker in:\n${human.stdout}`);
      assert.match(lines[marker - 1], new RegExp(`^\\s+4\\s+${keys[3]}\\s`));
      assert.match(lines[marker + 1], new RegExp(`^\\s+5\\s+${keys[4]}\\s`));
      assert.match(human.stdout, new RegExp(`^\\s+11\\s+${keys[10]}\\s.*send-report: committed$`, 'm'));

      const shown = (await cli('runs', 'show', 'crashed', '--json')).json<ShownRun>();
      const { entries } = shown.timeline;
      assert.deepEqual(
        entries.map((e) => [e.sequence, e.step]),
        keys.map((k, i) => [i + 1, k]),
      );
      assert.deepEqual(
        entries.map((e) => e.resumedBefore !== null),
        keys.map((_, i) => i === 4),
        'exactly one resume, before sequence 5',
      );
      assert.equal(shown.timeline.resumes, 1);
      assert.ok(shown.timeline.leaseEpoch >= 2);
      assert.ok(entries.every((e) => e.attempt === 1 && e.durationMs >= 0 && e.corrupted === null));
      assert.deepEqual(
        entries[10].sideEffects.map((s) => [s.name, s.state, s.attempts]),
        [['send-report', 'committed', 1]],
      );
      assert.ok(entries.slice(0, 10).every((e) => e.sideEffects.length === 0));

      const done = (await cli('runs', 'show', 'done', '--json')).json<ShownRun>();
      assert.equal(done.timeline.resumes, 0, 'a run executed by one process has no resume');
    });

    it('runs show --module lists the steps still to run, the next one first', async () => {
      const shown = (await cli('runs', 'show', 'stuck', '--module', FIXTURE_MODULE, '--json')).json<ShownRun>();
      assert.deepEqual(
        shown.timeline.entries.map((e) => e.step),
        keys.slice(0, 2),
      );
      assert.deepEqual(
        shown.timeline.pending.map((p) => p.step),
        keys.slice(2),
      );
      assert.deepEqual(
        shown.timeline.pending.map((p) => p.next),
        keys.slice(2).map((_, i) => i === 0),
      );
    });

    it('runs show of an unknown run: exit 3, one line', async () => {
      const missing = await cli('runs', 'show', 'no-such-run');
      assertExit(missing, 3, 'runs show no-such-run');
      assertOneLineError(missing, /Run 'no-such-run' is not in /);
      assert.equal(missing.stdout, '');
    });

    it('runs resume: continues the stuck run with the module, skipping its 2 checkpointed steps', async () => {
      const resumed = await cli('runs', 'resume', 'stuck', '--module', FIXTURE_MODULE, '--json');
      assertExit(resumed, 0, 'runs resume');
      const result = resumed.json<{ status: string; stepsSkipped: number; stepsExecuted: number; lastSequence: number }>();
      assert.deepEqual([result.status, result.stepsSkipped, result.stepsExecuted, result.lastSequence], ['completed', 2, keys.length - 2, keys.length]);
      assert.equal(readOutbox(env.WAYPOINT_OUTBOX!).filter((e) => e.runId === 'stuck' && e.status === 'delivered').length, 1, 'report sent once');
      const shown = (await cli('runs', 'show', 'stuck', '--json')).json<ShownRun>();
      assert.equal(shown.timeline.resumes, 1);
      assert.notEqual(shown.timeline.entries[2].resumedBefore, null);
      const again = await cli('runs', 'resume', 'stuck', '--module', FIXTURE_MODULE);
      assertExit(again, 0, 'resuming a completed run');
      assert.match(again.stdout, /already completed/);
    });

    it('verify: every row intact (exit 0), then finds a byte flipped with SQL (exit 4) and names the row', async () => {
      const clean = await cli('verify', '--json');
      assertExit(clean, 0, 'verify');
      const intact = clean.json<{ runs: number; rows: number; ok: boolean; corrupted: unknown[] }>();
      assert.deepEqual([intact.runs, intact.rows, intact.ok, intact.corrupted], [3, 33, true, []]);

      await db.flipByte('done', 3);
      const dirty = await cli('verify', '--json');
      assertExit(dirty, 4, 'verify after the flip');
      const report = dirty.json<{ ok: boolean; corrupted: { runId: string; sequence: number; step: string; reason: string }[] }>();
      assert.equal(report.ok, false);
      assert.deepEqual(
        report.corrupted.map((c) => [c.runId, c.sequence, c.step]),
        [['done', 3, keys[2]]],
      );
      assert.match(report.corrupted[0].reason, /SHA-256/);

      const human = await cli('verify');
      assertExit(human, 4, 'verify (table)');
      assert.match(human.stdout, new RegExp(`^done\\s+3\\s+${keys[2]}\\s+SHA-256 of the stored payload does not match:`, 'm'));
      assert.match(human.stdout, /1 corrupted in 1 run/);
      assert.match(human.stdout, /waypoint-durable runs fork done --from-sequence 2/);

      assertExit(await cli('verify', 'crashed', 'stuck'), 0, 'verify of the intact runs only');
      const shown = await cli('runs', 'show', 'done');
      assertExit(shown, 4, 'runs show of a corrupted run');
      assert.match(shown.stdout, /^\s+!3\s/m);
      assert.match(shown.stdout, /CORRUPTED: SHA-256 of the stored payload does not match/);
    });
  });
}
