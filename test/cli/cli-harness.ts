import { strict as assert } from 'node:assert';
import { resolve } from 'node:path';
import { EXAMPLE_WORKER, spawnNode, type ChildExit } from '../helpers/child-process';

/** The compiled `waypoint` binary (next to the compiled tests: <outDir>/test/cli and <outDir>/src/cli). */
export const CLI = resolve(__dirname, '../../src/cli/main.js');
/** The `--module` the resume tests pass: the financial-analysis example, configured from the environment. */
export const FIXTURE_MODULE = resolve(__dirname, 'financial-module.js');

/** How one `waypoint` invocation ended. */
export interface CliRun {
  code: number | null;
  stdout: string;
  stderr: string;
  /** stdout parsed as JSON (for `--json`); fails the test with the output when it is not JSON. */
  json<T = unknown>(): T;
}

/**
 * Runs the real binary in a child process: `node <outDir>/src/cli/main.js ...args`, with WAYPOINT_STORE and
 * WAYPOINT_MODULE cleared unless `env` sets them, and progress off unless asked (stderr is a pipe anyway).
 *
 * @example
 * const listed = await waypoint(['--store', url, 'runs', 'list', '--json']);
 * assert.equal(listed.code, 0);
 */
export async function waypoint(args: string[], env: Record<string, string | undefined> = {}): Promise<CliRun> {
  const exit: ChildExit = await spawnNode(CLI, args, { WAYPOINT_STORE: undefined, WAYPOINT_MODULE: undefined, WAYPOINT_HMAC_KEY: undefined, ...env }).exited;
  return {
    code: exit.code,
    stdout: exit.stdout,
    stderr: exit.stderr,
    json<T>() {
      try {
        return JSON.parse(exit.stdout) as T;
      } catch {
        throw new Error(`waypoint ${args.join(' ')} printed no JSON (exit ${exit.code}).\nstdout: ${exit.stdout}\nstderr: ${exit.stderr}`);
      }
    },
  };
}

/** Asserts the exit code, showing the output when it differs. */
export function assertExit(run: CliRun, code: number, what: string): void {
  assert.equal(run.code, code, `${what}: expected exit ${code}, got ${run.code}\nstdout: ${run.stdout}\nstderr: ${run.stderr}`);
}

/** Asserts the failure is reported as exactly one line `waypoint: ...` on stderr. */
export function assertOneLineError(run: CliRun, pattern: RegExp): void {
  const lines = run.stderr.split('\n').filter((l) => l.trim() !== '');
  assert.equal(lines.length, 1, `one error line expected, got:\n${run.stderr}`);
  assert.match(lines[0], /^waypoint: /);
  assert.match(lines[0], pattern);
}

/**
 * Runs the financial-analysis example worker for `runId` against the database in `env` (SQLite or
 * PostgreSQL variables), optionally crashing at a fault point; resolves with its exit.
 */
export function runWorker(runId: string, env: Record<string, string | undefined>): Promise<ChildExit> {
  return spawnNode(EXAMPLE_WORKER, [runId], {
    WAYPOINT_FAULT: undefined,
    WAYPOINT_LLM_HOLD: undefined,
    WAYPOINT_LOG_LEVEL: 'error',
    WAYPOINT_LLM_DELAY_MS: '2',
    WAYPOINT_WORKER_ID: undefined,
    ...env,
  }).exited;
}

/** Runs a worker that must complete. */
export async function completeWorker(runId: string, env: Record<string, string | undefined>): Promise<void> {
  const exit = await runWorker(runId, env);
  assert.equal(exit.code, 0, `worker ${runId} failed: ${exit.stdout} ${exit.stderr}`);
}

/** Runs a worker that must die of SIGKILL at `fault` (e.g. `after-checkpoint-before-next-step@4`). */
export async function crashWorker(runId: string, fault: string, env: Record<string, string | undefined>): Promise<void> {
  const exit = await runWorker(runId, { ...env, WAYPOINT_FAULT: fault });
  assert.equal(exit.signal, 'SIGKILL', `worker ${runId} should have died at ${fault}: code ${exit.code} ${exit.stdout} ${exit.stderr}`);
}

/** `text` with its first lowercase letter changed to the next one: still valid JSON, silently wrong. */
export function flipped(text: string): string {
  const at = text.search(/[a-y]/);
  assert.ok(at >= 0, `nothing to flip in ${text}`);
  return text.slice(0, at) + String.fromCharCode(text.charCodeAt(at) + 1) + text.slice(at + 1);
}
