/**
 * Process plumbing the examples' demo and worker scripts share: starting a worker and reading the one
 * JSON line it prints, and how a script reports its end. None of it is part of a pipeline: each example's
 * pipeline, agents and services are whole in its own directory.
 */
import { spawn } from 'node:child_process';
import { WaypointError, type RunResult } from 'waypoint-durable';

/** How a worker process ended, with its stdout. */
export interface WorkerExit {
  pid: number;
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
}

export interface WorkerProcess {
  pid: number;
  exited: Promise<WorkerExit>;
  /** SIGKILL: no handler runs, as in a crash. */
  kill(): void;
}

/**
 * Spawns `node script ...args` with `env` added to this process's environment: stdout collected for the
 * result line, stderr passed through.
 *
 * @example
 * const worker = startWorkerProcess(join(__dirname, 'worker.js'), [RUN_ID], { WAYPOINT_WORKER_ID: 'worker-1' });
 */
export function startWorkerProcess(script: string, args: string[], env: Record<string, string | undefined>): WorkerProcess {
  const child = spawn(process.execPath, [script, ...args], { env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'inherit'] });
  let stdout = '';
  child.stdout.setEncoding('utf8').on('data', (chunk: string) => (stdout += chunk));
  const exited = new Promise<WorkerExit>((done, fail) => {
    child.once('error', fail);
    child.once('close', (code, signal) => done({ pid: child.pid!, code, signal, stdout }));
  });
  return { pid: child.pid!, exited, kill: () => child.kill('SIGKILL') };
}

/** The RunResult a worker printed as its last line; null (the error printed) when it printed `{"error":...}` or nothing. */
export function parseResult(stdout: string): RunResult | null {
  const line = stdout.trim().split('\n').pop();
  try {
    const parsed = JSON.parse(line ?? '') as RunResult & { error?: { message: string } };
    if (parsed.error) console.error(`  worker error: ${parsed.error.message}`);
    return parsed.error ? null : parsed;
  } catch {
    return null;
  }
}

export function pause(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}

/** A demo's end: its exit code is what `main` returns (0 when every check held); 2 when it threw. */
export function runDemoMain(main: () => Promise<number>): void {
  main().then(
    (code) => (process.exitCode = code),
    (error: unknown) => {
      console.error('demo failed:', error);
      process.exitCode = 2;
    },
  );
}

/** A worker's end on failure: `{"error":{code,name,message}}` as its one stdout line, exit code 1. */
export function runWorkerMain(main: () => Promise<void>): void {
  main().catch((error: unknown) => {
    const described =
      error instanceof WaypointError
        ? { code: error.code, name: error.name, message: error.message }
        : { code: null, name: error instanceof Error ? error.name : 'Error', message: error instanceof Error ? error.message : String(error) };
    process.stdout.write(JSON.stringify({ error: described }) + '\n');
    process.exitCode = 1;
  });
}

/** An optional numeric environment variable: unset or empty is undefined. */
export function optionalNumber(text: string | undefined): number | undefined {
  return text === undefined || text === '' ? undefined : Number(text);
}
