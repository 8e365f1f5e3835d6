import { strict as assert } from 'node:assert';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { after, afterEach, describe, it } from 'node:test';
import type { CheckpointStore, LoadedRun } from '../../src/contract/checkpoint-store';
import { killLiveChildren, lastJsonLine, spawnNode, waitFor, waitForLine, type ChildExit, type ChildHandle } from '../helpers/child-process';
import { isolatedBackend, type BackendName, type IsolatedBackend } from './backends';
import { LEASE_PIPELINE_STEPS, leaseStepKeys, readExecLog, type ExecEntry } from './lease-pipeline';

/** The compiled worker, next to this file in the output directory. */
const WORKER = resolve(__dirname, 'worker.js');
const TTL_MS = 1_000;

interface WorkerLine {
  pid: number;
  worker: string;
  locked?: number;
  result?: { status: string; stepsExecuted: number; stepsSkipped: number; lastSequence: number };
  error?: { code: string; message: string };
}

/** One test's world: an isolated backend, a temp dir (execution log, barrier files) and a reading store. */
class Arena {
  readonly log: string;
  private constructor(
    readonly backend: IsolatedBackend,
    readonly dir: string,
    readonly reader: CheckpointStore,
  ) {
    this.log = join(dir, 'exec.jsonl');
  }

  static async open(name: BackendName, testName: string): Promise<Arena> {
    const backend = await isolatedBackend(name, `split-brain: ${testName}`);
    const reader = backend.open();
    await reader.init();
    return new Arena(backend, mkdtempSync(join(tmpdir(), 'waypoint-lease-')), reader);
  }

  file(name: string): string {
    return join(this.dir, name);
  }

  spawn(worker: string, env: Record<string, string>): ChildHandle {
    return spawnNode(WORKER, [], {
      ...this.backend.env,
      WP_RUN_ID: 'contended',
      WP_WORKER_ID: worker,
      WP_EXEC_LOG: this.log,
      WP_LEASE_TTL_MS: String(TTL_MS),
      WAYPOINT_LOG_LEVEL: 'error',
      ...env,
    });
  }

  exec(): ExecEntry[] {
    return readExecLog(this.log);
  }

  async close(): Promise<void> {
    await this.reader.close();
    await this.backend.dispose();
    rmSync(this.dir, { recursive: true, force: true });
  }
}

function outcome(exit: ChildExit): WorkerLine {
  return lastJsonLine<WorkerLine>(exit);
}

/**
 * The whole pipeline recorded exactly once, in plan order, and each recorded step executed by exactly
 * one process, the one whose output was recorded. Returns the recorded executor pid of every step.
 */
function assertExactlyOnce(loaded: LoadedRun | null, exec: ExecEntry[], allowedExtraStarts: Record<string, number> = {}): number[] {
  const keys = leaseStepKeys();
  assert.ok(loaded, 'the run exists');
  assert.equal(loaded.run.status, 'completed');
  assert.deepEqual(
    loaded.steps.map((s) => s.sequence),
    keys.map((_, i) => i + 1),
    'sequences 1..n, none twice, no gap',
  );
  assert.deepEqual(
    loaded.steps.map((s) => `${s.agentId}/${s.stepName}`),
    keys,
    'every step recorded once, in plan order',
  );
  return loaded.steps.map((row, i) => {
    const recordedPid = (Object.values(JSON.parse(row.output) as Record<string, unknown>)[0] as { pid: number }).pid;
    const starts = exec.filter((e) => e.event === 'start' && e.step === keys[i]);
    const ends = exec.filter((e) => e.event === 'end' && e.step === keys[i]);
    assert.equal(starts.length, 1 + (allowedExtraStarts[keys[i]] ?? 0), `${keys[i]} started ${starts.length} time(s)`);
    assert.ok(
      starts.some((e) => e.pid === recordedPid),
      `${keys[i]} was executed by the process whose output was recorded`,
    );
    assert.ok(ends.some((e) => e.pid === recordedPid));
    return recordedPid;
  });
}

/**
 * Split-brain tests with real processes on one backend: several workers resume one run at once, over
 * and over; and an executor frozen past its lease TTL is fenced when it wakes up.
 */
export function splitBrainSuite(name: BackendName): void {
  describe(`${name}: one executor per run, with real processes`, () => {
    const arenas: Arena[] = [];
    const openArena = async (testName: string) => {
      const arena = await Arena.open(name, testName);
      arenas.push(arena);
      return arena;
    };
    afterEach(async () => {
      await killLiveChildren();
      for (const arena of arenas.splice(0)) await arena.close();
    });
    after(killLiveChildren);

    it('4 workers resume the run at once, round after round: one executes each round, the others get RUN_LOCKED', async () => {
      const arena = await openArena('rounds');
      const workers = 4;
      const perRound = 3;
      const winners: WorkerLine[] = [];
      for (let round = 0; round < LEASE_PIPELINE_STEPS / perRound; round++) {
        const go = arena.file(`go-${round}`);
        const gate = arena.file(`gate-${round}`);
        // The winner's first step waits at the gate until every loser has answered, so the lease is
        // provably held while they try, however the processes are scheduled.
        const children = Array.from({ length: workers }, (_, i) => arena.spawn(`round${round}-worker${i}`, { WP_GO: go, WP_HOLD_FIRST: gate, WP_MAX_STEPS: String(perRound) }));
        await Promise.all(children.map((child) => waitForLine(child, /"ready":true/, 30_000)));
        writeFileSync(go, '');
        await waitFor(() => children.filter((c) => c.exitedYet()).length >= workers - 1, { what: `${workers - 1} workers to give up`, timeoutMs: 30_000 });
        const [winner, ...losers] = [...children].sort((a, b) => Number(a.exitedYet()) - Number(b.exitedYet()));
        assert.equal(winner.exitedYet(), false, 'exactly one worker is still running: the lease holder');
        const lost = await Promise.all(losers.map((c) => c.exited));
        const holder = `round${round}-worker${children.indexOf(winner)}`;
        for (const exit of lost) {
          const line = outcome(exit);
          assert.equal(exit.code, 2, `a loser exits with RUN_LOCKED: ${JSON.stringify(line)}`);
          assert.equal(line.error?.code, 'RUN_LOCKED');
          assert.match(line.error.message, new RegExp(`being executed by '${holder}'`));
        }
        writeFileSync(gate, '');
        const won = await winner.exited;
        const line = outcome(won);
        assert.equal(won.code, 0, JSON.stringify(line));
        assert.deepEqual([line.result?.status, line.result?.stepsExecuted, line.result?.stepsSkipped], [round === 2 ? 'completed' : 'paused', perRound, perRound * round]);
        winners.push(line);
      }
      const exec = arena.exec();
      const pids = assertExactlyOnce(await arena.reader.loadRun('contended'), exec);
      assert.deepEqual(
        pids,
        winners.flatMap((w) => Array<number>(perRound).fill(w.pid)),
        'each round’s steps were executed by that round’s winner',
      );
      assert.deepEqual(
        exec.filter((e) => e.event === 'write' && e.outcome !== 'ok'),
        [],
        'no write was ever rejected: nobody else tried',
      );
    });

    it('3 workers retrying on RUN_LOCKED race for the run until it completes: every step executed and recorded once', async () => {
      const arena = await openArena('race');
      const go = arena.file('go');
      const children = Array.from({ length: 3 }, (_, i) => arena.spawn(`racer${i}`, { WP_GO: go, WP_LOOP: '1', WP_MAX_STEPS: '2', WP_STEP_MS: '15', WP_RETRY_MS: '5' }));
      await Promise.all(children.map((child) => waitForLine(child, /"ready":true/, 30_000)));
      writeFileSync(go, '');
      const lines = (await Promise.all(children.map((c) => c.exited))).map((exit) => {
        assert.equal(exit.code, 0, exit.stdout + exit.stderr);
        return outcome(exit);
      });
      assert.equal(
        lines.reduce((sum, l) => sum + l.result!.stepsExecuted, 0),
        LEASE_PIPELINE_STEPS,
        'the steps executed add up to the pipeline',
      );
      assert.ok(lines.reduce((sum, l) => sum + (l.locked ?? 0), 0) > 0, 'the workers did contend');
      assertExactlyOnce(await arena.reader.loadRun('contended'), arena.exec());
      assert.deepEqual(
        arena.exec().filter((e) => e.event === 'write' && e.outcome !== 'ok'),
        [],
      );
    });

    for (const variant of [
      { title: 'its heartbeat finds the lease gone', heartbeatMs: String(Math.floor(TTL_MS / 3)) },
      { title: 'the store rejects its late write (no heartbeat in between)', heartbeatMs: '600000' },
    ]) {
      it(`an executor frozen (SIGSTOP) past its lease TTL is fenced after SIGCONT, ${variant.title}; nothing it does is recorded`, async () => {
        const arena = await openArena(`sigstop ${variant.heartbeatMs}`);
        const held = leaseStepKeys()[4];
        const release = arena.file('release');
        const stalled = arena.spawn('stalled', { WP_HOLD_STEP: held, WP_HOLD_FILE: release, WP_HEARTBEAT_MS: variant.heartbeatMs });
        await waitFor(() => arena.exec().some((e) => e.event === 'start' && e.step === held), { what: `${held} to start`, child: stalled });
        stalled.process.kill('SIGSTOP');
        await new Promise((r) => setTimeout(r, TTL_MS * 1.5));

        // The successor takes the expired lease and holds in its first step, so the woken executor's
        // next write would be in sequence: only the lease epoch can reject it.
        const gate = arena.file('successor-gate');
        const successor = arena.spawn('successor', { WP_WAIT_FOR_LOCK_MS: '20000', WP_HOLD_FIRST: gate });
        await waitFor(() => arena.exec().some((e) => e.event === 'start' && e.step === held && e.worker === 'successor'), { what: 'the successor to take over', child: successor });
        const before = await arena.reader.loadRun('contended');
        assert.equal(before?.run.leaseOwner, 'successor');

        writeFileSync(release, '');
        stalled.process.kill('SIGCONT');
        const fenced = await stalled.exited;
        const fencedLine = outcome(fenced);
        assert.equal(fenced.code, 3, JSON.stringify(fencedLine));
        assert.equal(fencedLine.error?.code, 'LEASE_LOST');
        // The successor is alive and renews its own lease every TTL/3: a later expiry is its doing, not the
        // woken executor's (whose exit can take longer than that, e.g. stopping a write-behind flusher).
        const after = (await arena.reader.loadRun('contended'))!;
        assert.ok(after.run.leaseExpiresAt! >= before.run.leaseExpiresAt!, 'the successor still holds its lease');
        assert.deepEqual({ ...after, run: { ...after.run, leaseExpiresAt: before.run.leaseExpiresAt } }, before, 'the woken executor changed nothing');

        writeFileSync(gate, '');
        const done = await successor.exited;
        const line = outcome(done);
        assert.equal(done.code, 0, JSON.stringify(line));
        assert.deepEqual([line.result?.status, line.result?.stepsSkipped, line.result?.stepsExecuted], ['completed', 4, 5]);
        const settled = await arena.reader.loadRun('contended');

        const exec = arena.exec();
        const pids = assertExactlyOnce(settled, exec, { [held]: 1 });
        assert.deepEqual(pids, [...Array<number>(4).fill(stalled.pid), ...Array<number>(5).fill(successor.pid)]);
        const lateWrites = exec.filter((e) => e.event === 'write' && e.pid === stalled.pid && (e.sequence ?? 0) >= 5);
        assert.ok(
          lateWrites.every((e) => e.outcome === 'LEASE_LOST'),
          `late writes rejected: ${JSON.stringify(lateWrites)}`,
        );
        if (variant.heartbeatMs === '600000') {
          // No renewal ran in between, so the step finished and its checkpoint write reached the store.
          assert.ok(
            exec.some((e) => e.event === 'end' && e.step === held && e.pid === stalled.pid),
            'the stalled step finished its work after SIGCONT',
          );
          assert.deepEqual(
            lateWrites.map((e) => [e.method, e.sequence, e.outcome]),
            [['appendStep', 5, 'LEASE_LOST']],
            'the late append reached the store and was fenced',
          );
        }
      });
    }
  });
}
