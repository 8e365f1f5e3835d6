import { strict as assert } from 'node:assert';
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';

/** The compiled financial-analysis worker (tests run from dist/test/..., the worker from dist/examples/...). */
export const EXAMPLE_WORKER = resolve(__dirname, '../../examples/financial-analysis/worker.js');

/** How a child process ended, with everything it printed. */
export interface ChildExit {
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
  /** Non-empty stdout lines. */
  lines: string[];
}

/** A spawned node process: its output so far, its exit, and a way to kill it. */
export interface ChildHandle {
  readonly pid: number;
  readonly process: ChildProcess;
  stdout(): string;
  stderr(): string;
  /** True once the process has exited. */
  exitedYet(): boolean;
  /** Resolves when the process has exited (after its output streams closed). */
  readonly exited: Promise<ChildExit>;
  /** Sends `signal` (default SIGKILL) and waits for the exit. */
  kill(signal?: NodeJS.Signals): Promise<ChildExit>;
}

const live = new Set<ChildHandle>();

/**
 * Spawns `node script ...args` with `env` added to this process's environment (an undefined value
 * removes the variable). Output is collected; nothing is inherited, so test output stays clean.
 *
 * @example
 * const child = spawnNode(EXAMPLE_WORKER, ['run-1'], { WAYPOINT_DB: path });
 * const exit = await child.exited;
 */
export function spawnNode(script: string, args: string[] = [], env: Record<string, string | undefined> = {}): ChildHandle {
  const merged: NodeJS.ProcessEnv = { ...process.env };
  for (const [key, value] of Object.entries(env)) {
    if (value === undefined) delete merged[key];
    else merged[key] = value;
  }
  const child = spawn(process.execPath, [script, ...args], { env: merged, stdio: ['ignore', 'pipe', 'pipe'] });
  if (child.pid === undefined) throw new Error(`could not spawn ${script}`);
  let out = '';
  let err = '';
  child.stdout.setEncoding('utf8').on('data', (chunk: string) => (out += chunk));
  child.stderr.setEncoding('utf8').on('data', (chunk: string) => (err += chunk));
  let done = false;
  // 'close' (not 'exit') so that everything the child wrote has been read.
  const exited = new Promise<ChildExit>((resolveExit, rejectExit) => {
    child.once('error', rejectExit);
    child.once('close', (code, signal) => {
      done = true;
      live.delete(handle);
      resolveExit({ code, signal, stdout: out, stderr: err, lines: out.split('\n').filter((l) => l.trim() !== '') });
    });
  });
  const handle: ChildHandle = {
    pid: child.pid,
    process: child,
    stdout: () => out,
    stderr: () => err,
    exitedYet: () => done,
    exited,
    kill: (signal = 'SIGKILL') => {
      if (!done) child.kill(signal);
      return exited;
    },
  };
  live.add(handle);
  return handle;
}

/**
 * Polls `condition` every `intervalMs` until it holds. Rejects when `timeoutMs` passes or, if `child` is
 * given, when that child exits first (with its stderr tail, so the test says why).
 *
 * @example
 * await waitFor(() => readCallLog(log).some((r) => r.tag === tag), { child, what: `call ${tag} to start` });
 */
export async function waitFor(condition: () => boolean | Promise<boolean>, options: { what: string; child?: ChildHandle; timeoutMs?: number; intervalMs?: number }): Promise<void> {
  const { what, child, timeoutMs = 20_000, intervalMs = 5 } = options;
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (await condition()) return;
    if (child?.exitedYet()) {
      const exit = await child.exited;
      throw new Error(`child ${child.pid} exited (code ${exit.code}, signal ${exit.signal}) before ${what}.\nstdout: ${tail(exit.stdout)}\nstderr: ${tail(exit.stderr)}`);
    }
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, intervalMs));
  }
}

/**
 * Waits for a stdout line of `child` that `match` accepts and returns it; rejects if the child exits
 * first or `timeoutMs` passes.
 *
 * @example
 * const line = await waitForLine(child, /"status":"completed"/);
 */
export async function waitForLine(child: ChildHandle, match: RegExp | ((line: string) => boolean), timeoutMs = 20_000): Promise<string> {
  const accepts = typeof match === 'function' ? match : (line: string) => match.test(line);
  let found: string | undefined;
  await waitFor(
    () => {
      // Only complete lines: the last element is whatever follows the last newline so far.
      found = child
        .stdout()
        .split('\n')
        .slice(0, -1)
        .find((line) => line.trim() !== '' && accepts(line));
      return found !== undefined;
    },
    { what: `a stdout line matching ${String(match)}`, child, timeoutMs },
  );
  return found!;
}

/**
 * The last stdout line of an exited child, parsed as JSON. Throws with the child's output when there is
 * none or it is not JSON.
 */
export function lastJsonLine<T = unknown>(exit: ChildExit): T {
  const line = exit.lines[exit.lines.length - 1];
  try {
    if (line === undefined) throw new Error('no output');
    return JSON.parse(line) as T;
  } catch {
    throw new Error(`child printed no JSON result (code ${exit.code}, signal ${exit.signal}).\nstdout: ${tail(exit.stdout)}\nstderr: ${tail(exit.stderr)}`);
  }
}

/** SIGKILLs every child spawned here that is still running (call from an `after` hook). */
export async function killLiveChildren(): Promise<void> {
  await Promise.all([...live].map((child) => child.kill('SIGKILL')));
}

function tail(text: string, max = 2000): string {
  return text.length > max ? `...${text.slice(-max)}` : text;
}

/**
 * Runs an example's demo (`node script`) to its end in a fresh temp directory (demos write under
 * ./.waypoint), without this process's variables whose names start with `envPrefix`; asserts that it exited
 * 0 and printed `checks` check lines, every one ✓. `inspect` gets its output and directory before the
 * directory is removed.
 *
 * @example
 * await runDemo(DEMO, { envPrefix: 'WAYPOINT_', checks: 9, inspect: (out) => assert.match(out, /All checks passed/) });
 */
export async function runDemo(script: string, options: { envPrefix: string; checks: number; inspect: (out: string, cwd: string) => void }): Promise<void> {
  const cwd = mkdtempSync(join(tmpdir(), 'waypoint-demo-'));
  try {
    const env = { ...process.env };
    for (const name of Object.keys(env)) if (name.startsWith(options.envPrefix)) delete env[name];
    const run = spawn(process.execPath, [script], { cwd, env, stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    run.stdout.setEncoding('utf8').on('data', (c: string) => (out += c));
    run.stderr.setEncoding('utf8').on('data', (c: string) => (out += c));
    const code = await new Promise<number | null>((resolve, reject) => {
      run.once('error', reject);
      run.once('close', resolve);
    });
    assert.equal(code, 0, out);
    const checks = out.split('\n').filter((l) => /^\s+[✓✗] /.test(l));
    assert.equal(checks.length, options.checks, out);
    assert.ok(
      checks.every((l) => l.includes('✓')),
      out,
    );
    options.inspect(out, cwd);
  } finally {
    rmSync(cwd, { recursive: true, force: true });
  }
}

/** A process started under a parent that never reaps it (see {@link spawnUnreaped}). */
export interface UnreapedChild {
  /** The child's pid: once it exits it stays a zombie until `parent` is killed. */
  pid: number;
  /** The non-reaping parent (a shell that exec'd into `sleep`); kill it to reap the child. */
  parent: ChildProcess;
}

/**
 * Starts `command args...` in the background of a shell that then execs into `sleep`, which never reaps it,
 * so the command stays a zombie after it exits, as a killed worker does until its parent's event loop reaps
 * it. Resolves once the shell has exec'd: a child killed before that would be reaped by bash itself and be
 * gone, not a zombie (the race a loaded CI machine met).
 *
 * @example
 * const { pid, parent } = await spawnUnreaped('sleep', ['30']);
 */
export async function spawnUnreaped(command: string, args: string[], options: { env?: NodeJS.ProcessEnv } = {}): Promise<UnreapedChild> {
  const script = '"$@" >/dev/null 2>&1 & echo $!; exec sleep 300';
  const parent = spawn('bash', ['-c', script, 'bash', command, ...args], { env: options.env ?? process.env, stdio: ['ignore', 'pipe', 'ignore'] });
  const [line] = (await once(parent.stdout, 'data')) as [Buffer];
  const pid = Number(line.toString().trim());
  await waitFor(() => commandName(parent.pid!) === 'sleep', { what: `shell ${parent.pid} to exec into sleep`, intervalMs: 2, timeoutMs: 10_000 });
  return { pid, parent };
}

/** The command name of `pid` (Linux /proc, else `ps`); '' when it cannot be read. */
function commandName(pid: number): string {
  try {
    if (process.platform === 'linux') return readFileSync(`/proc/${pid}/comm`, 'utf8').trim();
    const ps = spawnSync('ps', ['-o', 'comm=', '-p', String(pid)], { encoding: 'utf8' });
    return ps.stdout.trim().split('/').pop() ?? '';
  } catch {
    return '';
  }
}
