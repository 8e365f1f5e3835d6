import type { LifecycleConfig } from './pipeline';

/** Settings of one worker process. */
export interface WorkerConfig {
  store: { sqlite: string } | { pg: { url: string; schema: string } };
  steps: LifecycleConfig;
  workerId?: string;
  leaseTtlMs?: number;
  heartbeatMs?: number;
  gracePeriodMs?: number;
  /**
   * A hard deadline this many ms after the worker has opened its store (so process start-up time does
   * not eat into it), given to runUntilSignal's shutdown options (the harness) or to the run options (the driver).
   */
  deadlineInMs?: number;
  deadlineBufferMs?: number;
  deadlineVia?: 'harness' | 'run';
  /** Install a SIGTERM handler of the "host application" before runUntilSignal. */
  hostHandler?: boolean;
}

/** Environment variable carrying the JSON WorkerConfig. */
export const WORKER_ENV = 'LIFECYCLE_WORKER';
