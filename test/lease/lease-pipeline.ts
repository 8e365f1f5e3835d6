import 'reflect-metadata';
import { appendFileSync, existsSync, readFileSync } from 'node:fs';
import { Agent, Pipeline, Step, type StepContext } from '../../src/index';
import type { Class } from '../../src/decorators/options';

/**
 * The pipeline of the lease tests, and the execution log its steps write: every step appends a `start`
 * line before its work and an `end` line after it, with the pid and worker id of the process running it,
 * so a test can tell exactly which process executed which step, and how often. Each step returns the
 * pid that ran it, so the stored output says which execution was recorded.
 */
export const LEASE_PIPELINE_STEPS = 9;

/** One line of the execution log. */
export interface ExecEntry {
  event: 'start' | 'end' | 'write';
  pid: number;
  worker: string;
  /** 'AgentN/sK' for start / end. */
  step?: string;
  /** For 'write': the store method, the sequence it carried, and its outcome ('ok' or an error code). */
  method?: string;
  sequence?: number;
  outcome?: string;
  at: number;
}

export interface StepHooks {
  worker: string;
  log: string;
  /** Extra time every step takes. */
  stepMs: number;
  /** The first step this process runs waits until this file exists (a test's barrier). */
  holdFirstStepUntil?: string;
  /** The step with this key waits until `holdFile` exists. */
  holdStep?: string;
  holdFile?: string;
  /** Called after each step this process ran (counting, pausing). */
  afterStep?: () => void;
}

export function logExec(path: string, entry: Omit<ExecEntry, 'at' | 'pid'>): void {
  // One short O_APPEND write per line: lines from concurrent processes never interleave.
  appendFileSync(path, JSON.stringify({ ...entry, pid: process.pid, at: Date.now() }) + '\n');
}

export function readExecLog(path: string): ExecEntry[] {
  if (!existsSync(path)) return [];
  return readFileSync(path, 'utf8')
    .split('\n')
    .filter((line) => line.trim() !== '')
    .map((line) => JSON.parse(line) as ExecEntry);
}

async function waitForFile(path: string, signal: AbortSignal): Promise<void> {
  while (!existsSync(path)) {
    if (signal.aborted) throw signal.reason;
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
}

/** Step keys in plan order: 'Agent0/s0', ... (three agents of three steps). */
export function leaseStepKeys(): string[] {
  return Array.from({ length: LEASE_PIPELINE_STEPS }, (_, i) => `Agent${Math.floor(i / 3)}/s${i}`);
}

/** Builds the pipeline with the real decorators; `hooks` decide what each step waits for and logs. */
export function leasePipeline(hooks: StepHooks): Class {
  let ranHere = 0;
  const agents: Class[] = [];
  for (let a = 0; a < LEASE_PIPELINE_STEPS / 3; a++) {
    const agentClass = { [`Agent${a}`]: class extends Agent {} }[`Agent${a}`];
    for (let i = a * 3; i < a * 3 + 3; i++) {
      const name = `s${i}`;
      const key = `Agent${a}/${name}`;
      const method = async function (this: Agent, ctx: StepContext) {
        logExec(hooks.log, { event: 'start', worker: hooks.worker, step: key });
        if (ranHere === 0 && hooks.holdFirstStepUntil) await waitForFile(hooks.holdFirstStepUntil, ctx.signal);
        if (key === hooks.holdStep && hooks.holdFile) await waitForFile(hooks.holdFile, new AbortController().signal); // ignores aborts: a stalled step
        if (hooks.stepMs > 0) await new Promise((resolve) => setTimeout(resolve, hooks.stepMs));
        logExec(hooks.log, { event: 'end', worker: hooks.worker, step: key });
        ranHere += 1;
        hooks.afterStep?.();
        return { [name]: { pid: process.pid, worker: hooks.worker } };
      };
      Object.defineProperty(agentClass.prototype, name, { value: method, writable: true, configurable: true });
      Step()(agentClass.prototype, name, Object.getOwnPropertyDescriptor(agentClass.prototype, name)!);
    }
    agents.push(agentClass);
  }
  const pipeline = class LeasePipeline {};
  Pipeline({ name: 'lease-pipeline', version: '1.0.0', agents })(pipeline);
  return pipeline;
}
