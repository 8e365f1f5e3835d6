import { strict as assert } from 'node:assert';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { stepKeys } from '../../examples/financial-analysis/pipeline';
import { readCallLog } from '../../examples/financial-analysis/llm';
import { killLiveChildren, spawnNode, waitFor } from '../helpers/child-process';
import { CLI, FIXTURE_MODULE, assertExit, assertOneLineError, completeWorker, crashWorker, waypoint } from './cli-harness';

/**
 * The CLI's other commands and its error contract, on a SQLite file filled by real runs: migrate, stats,
 * cancel, fork and resume of the fork, compact, prune, and exit codes / one-line errors for bad usage,
 * unknown runs and unreachable stores.
 */
describe('waypoint CLI commands (SQLite)', { timeout: 300_000 }, () => {
  const keys = stepKeys();
  let dir: string;
  let store: string;
  let env: Record<string, string | undefined>;
  const cli = (...args: string[]) => waypoint(['--store', store, ...args], env);

  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'waypoint-cli-commands-'));
    const path = join(dir, 'waypoint.db');
    store = `sqlite:${path}`;
    env = { WAYPOINT_DB: path, WAYPOINT_PG_URL: undefined, WAYPOINT_OUTBOX: join(dir, 'outbox.jsonl'), WAYPOINT_LLM_DELAY_MS: '2' };
    await completeWorker('a', env);
    await crashWorker('b', 'after-checkpoint-before-next-step@1', env);
  });

  after(async () => {
    await killLiveChildren();
    rmSync(dir, { recursive: true, force: true });
  });

  it('the binary starts with a node shebang and knows its version', async () => {
    assert.equal(readFileSync(CLI, 'utf8').split('\n')[0], '#!/usr/bin/env node');
    const version = await waypoint(['--version']);
    assertExit(version, 0, '--version');
    assert.match(version.stdout, /^\d+\.\d+\.\d+/);
  });

  it('migrate creates a store, then finds it up to date; read commands refuse a missing store (exit 5)', async () => {
    const fresh = `sqlite:${join(dir, 'fresh', 'new.db')}`;
    const missing = await waypoint(['--store', fresh, 'runs', 'list']);
    assertExit(missing, 5, 'runs list on a missing file');
    assertOneLineError(missing, /holds no Waypoint store .*waypoint-durable migrate/);
    assert.equal(existsSync(join(dir, 'fresh', 'new.db')), false, 'a read command creates nothing');
    const created = await waypoint(['--store', fresh, 'migrate', '--json']);
    assertExit(created, 0, 'migrate');
    assert.equal(created.json<{ state: string }>().state, 'created');
    assert.equal((await waypoint(['--store', fresh, 'migrate', '--json'])).json<{ state: string }>().state, 'up to date');
    const empty = await waypoint(['--store', fresh, 'runs', 'list']);
    assertExit(empty, 0, 'runs list on an empty store');
    assert.match(empty.stdout, /^No runs in sqlite:/);
  });

  it('stats counts runs by status and pipeline and finds the stale run', async () => {
    await new Promise((r) => setTimeout(r, 50));
    const stats = await cli('stats', '--json');
    assertExit(stats, 0, 'stats');
    const parsed = stats.json<{
      runs: number;
      checkpoints: number;
      byStatus: Record<string, number>;
      byPipeline: Record<string, Record<string, number>>;
      oldestUnfinished: { runId: string };
    }>();
    assert.equal(parsed.runs, 2);
    assert.equal(parsed.checkpoints, keys.length + 1);
    assert.deepEqual(parsed.byStatus, { running: 1, paused: 0, waiting: 0, completed: 1, failed: 0, cancelled: 0 });
    assert.deepEqual(parsed.byPipeline['financial-analysis'], parsed.byStatus);
    assert.equal(parsed.oldestUnfinished.runId, 'b');
    const human = await cli('stats');
    assert.match(human.stdout, /^completed\s+1$/m);
  });

  it('runs cancel fences the run (idempotent); cancelling a completed run or resuming a cancelled one is a conflict (exit 6)', async () => {
    const cancelled = await cli('runs', 'cancel', 'b', '--reason', 'bad input', '--json');
    assertExit(cancelled, 0, 'runs cancel');
    assert.equal(cancelled.json<{ status: string }>().status, 'cancelled');
    const again = await cli('runs', 'cancel', 'b');
    assertExit(again, 0, 'cancelling a cancelled run');
    assert.match(again.stdout, /already cancelled; nothing to do/);
    const completed = await cli('runs', 'cancel', 'a');
    assertExit(completed, 6, 'cancelling a completed run');
    assertOneLineError(completed, /already completed; it cannot be cancelled/);
    assertExit(await cli('runs', 'resume', 'b', '--module', FIXTURE_MODULE), 6, 'resuming a cancelled run');
    assertExit(await cli('runs', 'cancel', 'nope'), 3, 'cancelling an unknown run');
  });

  it('runs fork copies the checkpoints before a step; runs resume finishes the fork from there', async () => {
    const target = keys[7];
    const forked = await cli('runs', 'fork', 'a', '--from', target, '--new-id', 'a2', '--json');
    assertExit(forked, 0, 'runs fork');
    assert.deepEqual(((f) => [f.runId, f.status, f.lastSequence])(forked.json<{ runId: string; status: string; lastSequence: number }>()), ['a2', 'paused', 7]);
    assertExit(await cli('runs', 'fork', 'a', '--new-id', 'a2'), 6, 'forking onto an existing run id');
    assertExit(await cli('runs', 'fork', 'a', '--from', 'noSuchStep', '--new-id', 'a3'), 3, 'forking from an unknown step');
    assertExit(await cli('runs', 'fork', 'a', '--from', target, '--from-sequence', '3'), 2, '--from with --from-sequence');

    const resumed = await cli('runs', 'resume', 'a2', '--module', FIXTURE_MODULE, '--json');
    assertExit(resumed, 0, 'resuming the fork');
    const result = resumed.json<{ status: string; stepsSkipped: number; stepsExecuted: number }>();
    assert.deepEqual([result.status, result.stepsSkipped, result.stepsExecuted], ['completed', 7, keys.length - 7]);
  });

  it('runs resume prints progress on stderr and a summary on stdout', async () => {
    assertExit(await cli('runs', 'fork', 'a', '--from-sequence', '9', '--new-id', 'a4'), 0, 'fork');
    const resumed = await cli('runs', 'resume', 'a4', '--module', FIXTURE_MODULE);
    assertExit(resumed, 0, 'runs resume');
    assert.match(resumed.stdout, /^Run a4 completed: 9 step\(s\) restored from checkpoints, 2 executed, 11\/11 steps recorded \(last sequence 11\)/);
    assert.match(resumed.stderr, /^resuming a4: 9 step\(s\) restored/m);
    assert.match(resumed.stderr, new RegExp(`^a4 10/11 ${keys[9]} \\(`, 'm'));
    assert.match(resumed.stderr, new RegExp(`^a4 11/11 ${keys[10]} \\(`, 'm'));
    const quiet = await cli('runs', 'resume', 'a4', '--module', FIXTURE_MODULE, '--no-progress');
    assert.equal(quiet.stderr, '');
  });

  it('runs resume pauses cleanly on SIGTERM at the step boundary: exit 75, run paused, resumable', async () => {
    assertExit(await cli('runs', 'fork', 'a', '--from-sequence', '3', '--new-id', 'a5'), 0, 'fork');
    const log = join(dir, 'llm-a5.jsonl');
    const held = keys[3];
    const child = spawnNode(CLI, ['--store', store, 'runs', 'resume', 'a5', '--module', FIXTURE_MODULE], {
      ...env,
      WAYPOINT_STORE: undefined,
      WAYPOINT_LLM_HOLD: held,
      WAYPOINT_LLM_LOG: log,
    });
    await waitFor(() => readCallLog(log).some((c) => c.tag === held && c.event === 'start'), { what: `the LLM call of ${held}`, child });
    const exit = await child.kill('SIGTERM');
    assert.equal(exit.code, 75, `stdout: ${exit.stdout}\nstderr: ${exit.stderr}`);
    assert.match(exit.stdout, /^Run a5 paused: 3 step\(s\) restored from checkpoints, 0 executed/m);
    assert.match(exit.stdout, /Resume it again with: waypoint-durable runs resume a5/);
    const shown = (await cli('runs', 'show', 'a5', '--json')).json<{ run: { status: string; lastSequence: number } }>();
    assert.deepEqual([shown.run.status, shown.run.lastSequence], ['paused', 3]);
    const finished = await cli('runs', 'resume', 'a5', '--module', FIXTURE_MODULE, '--json');
    assertExit(finished, 0, 'resume after the pause');
    assert.equal(finished.json<{ stepsSkipped: number }>().stepsSkipped, 3);
  });

  it('runs resume without a module that knows the pipeline is a usage error (exit 2)', async () => {
    const run = await cli('runs', 'resume', 'a2');
    assertExit(run, 2, 'resume without --module');
    assertOneLineError(run, /pipeline 'financial-analysis'.*--module/);
  });

  it('compact folds old checkpoints into a base snapshot; the run still verifies and shows', async () => {
    const compacted = await cli('compact', 'a2', '--keep-last', '3', '--json');
    assertExit(compacted, 0, 'compact');
    assert.deepEqual(compacted.json<{ compacted: unknown[] }>().compacted, [{ runId: 'a2', rows: keys.length - 3 }]);
    assertExit(await cli('verify', 'a2'), 0, 'verify after compaction');
    const shown = (await cli('runs', 'show', 'a2', '--json')).json<{ timeline: { entries: { kind: string; sequence: number }[] } }>();
    assert.deepEqual(
      shown.timeline.entries.map((e) => [e.kind, e.sequence]),
      [
        ['base', 8],
        ['step', 9],
        ['step', 10],
        ['step', 11],
      ],
    );
  });

  it('prune: --dry-run lists, then deletes only finished runs older than the cutoff, archiving them', async () => {
    const archive = join(dir, 'archive');
    const dry = await cli('prune', '--older-than', '1ms', '--status', 'cancelled', '--dry-run', '--json');
    assertExit(dry, 0, 'prune --dry-run');
    assert.deepEqual(dry.json<{ runs: string[] }>().runs, ['b']);
    assert.ok((await cli('runs', 'show', 'b')).code === 0, 'a dry run deletes nothing');
    const pruned = await cli('prune', '--older-than', '1ms', '--status', 'cancelled', '--archive', archive);
    assertExit(pruned, 0, 'prune');
    assert.match(pruned.stdout, /Pruned 1 cancelled run\(s\)/);
    assert.ok(existsSync(join(archive, 'runs', 'b', 'manifest.json')));
    assertExit(await cli('runs', 'show', 'b'), 3, 'the pruned run is gone');
    const listed = await cli('archive', 'list', '--archive', archive, '--json');
    assertExit(listed, 0, 'archive list');
    assert.deepEqual(listed.json<{ runs: string[] }>().runs, ['b']);
    const objects = await cli('archive', 'list', 'b', '--archive', archive);
    assertExit(objects, 0, 'archive list b');
    assert.match(objects.stdout, /prune-0+1-.*not in the store \(pruned\)/s);
    assertExit(await cli('archive', 'list', 'nope', '--archive', archive), 3, 'nothing archived of that run');
    const restored = await cli('archive', 'restore', 'b', '--archive', archive);
    assertExit(restored, 0, 'archive restore');
    assert.match(restored.stdout, /Restored pruned run 'b'/);
    assertExit(await cli('verify', 'b'), 0, 'the restored run verifies');
    assert.match((await cli('runs', 'show', 'b')).stdout, /cancelled/);
    assertExit(await cli('archive', 'restore', 'nope', '--archive', archive), 3, 'restore of a run never archived');
    assertExit(await cli('prune', '--older-than', '1ms', '--status', 'cancelled', '--archive', archive), 0, 'prune again');
    assertExit(await cli('prune', '--older-than', '1d', '--status', 'running'), 2, 'pruning running runs is refused');
    const kept = (await cli('prune', '--older-than', '1d', '--json')).json<{ runs: string[] }>();
    assert.deepEqual(kept.runs, [], 'recent runs are kept');
  });

  it('usage errors exit 2 with one line; --verbose adds the stack', async () => {
    // More bad values are checked in process (cli-units.test.ts); here the binary's own exit path.
    const unknown = await cli('runs', 'frobnicate');
    assertExit(unknown, 2, 'unknown command');
    assert.match(unknown.stderr, /^waypoint: unknown command 'frobnicate'/);
    const badValue = await cli('runs', 'list', '--since', 'yesterday');
    assertExit(badValue, 2, 'bad --since');
    assertOneLineError(badValue, /--since 'yesterday' is not a duration/);
    const badStore = await waypoint(['--store', 'mysql://db/x', 'runs', 'list']);
    assertExit(badStore, 2, 'unsupported store URL');
    assertOneLineError(badStore, /Unsupported store 'mysql:\/\/db\/x'/);
    const badModule = await cli('runs', 'list', '--module', join(dir, 'missing.js'));
    assertExit(badModule, 2, 'missing module');
    assertOneLineError(badModule, /Module '.*missing\.js' was not found/);

    const verbose = await cli('runs', 'show', 'nope', '--verbose');
    assertExit(verbose, 3, 'verbose not found');
    assert.match(verbose.stderr, /^waypoint: Run 'nope' is not in /);
    assert.match(verbose.stderr, /\n\s+at /, 'the stack follows with --verbose');
  });

  it('an unreachable PostgreSQL is exit 5 with one line, the password masked', async () => {
    const run = await waypoint(['--store', 'postgres://app:s3cret@127.0.0.1:9/db?schema=x', 'runs', 'list']);
    assertExit(run, 5, 'unreachable store');
    assertOneLineError(run, /Cannot reach postgres:\/\/app:\*\*\*@127\.0\.0\.1:9\/db/);
    assert.doesNotMatch(run.stderr, /s3cret/);
  });
});
