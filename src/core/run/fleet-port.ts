import type { Container, ServiceIdentifier } from 'inversify';
import type { CheckpointStore, RunRecord } from '../../contract/checkpoint-store';
import type { RunQueue } from '../../contract/run-queue';
import type { Class } from '../../decorators/options';
import type { PipelinePlan } from '../plan/plan-reader';
import type { RunOptions, RunResult } from './run-options';

/**
 * The port through which the fleet (src/queue) plugs into the runtime. The runtime owns these types; the
 * queue implements {@link FleetPort} and the composition root (`src/composition/defaults.ts`) binds it as
 * {@link FLEET}, so the runtime never imports the queue.
 */

/** What the fleet uses of a Waypoint (`Waypoint` implements it). */
export interface FleetHost {
  readonly container: Container;
  readonly store: CheckpointStore;
  register(pipeline: Class): void;
  prepare(pipeline: Class, options: { runId: string; input?: unknown }, metadata?: Record<string, string>): Promise<{ run: RunRecord; plan: PipelinePlan; created: boolean }>;
  run<S = Record<string, unknown>>(pipeline: Class, options: RunOptions): Promise<RunResult<S>>;
  resume<S = Record<string, unknown>>(runId: string, options?: Omit<RunOptions, 'runId' | 'input'>): Promise<RunResult<S>>;
}

/** Options of `enqueue`. */
export interface EnqueueOptions<I = Record<string, unknown>> {
  runId: string;
  /** Input of a new run (validated now, stored with the run). Omit it (or pass the same) for an existing run. */
  input?: I;
  /** Higher runs first: an integer in [-1000000, 1000000]. Default 0. */
  priority?: number;
  /** Concurrency group (a tenant, a customer): workers cap the runs of one group (`groupConcurrency`). */
  group?: string;
  /** Not before this many ms from now. */
  delayMs?: number;
  /** The queue to use. Default: the `RUN_QUEUE` binding of the Waypoint's container. */
  queue?: RunQueue;
  /** Base queue name (workers must use the same). Default 'waypoint'. */
  queueName?: string;
  /** Stored with a new run's record (as `prepare`'s metadata): e.g. the tenant the HTTP handler creates it under. */
  metadata?: Record<string, string>;
}

/** What `enqueue` did. */
export interface EnqueueResult {
  runId: string;
  /** Queue name of the run's pipeline. */
  queue: string;
  /** Id of the job that will advance the run; null when there is nothing left to run (completed). */
  jobId: string | null;
  /** True when this call created the job; false when the same job was already queued. */
  enqueued: boolean;
  /** True when this call created the run record. */
  created: boolean;
  /** The run's stored status after the call (`paused` while queued: see below). */
  status: RunRecord['status'];
}

/** A pipeline this worker runs, with its own limit of concurrent runs in this process. */
export interface WorkerPipeline {
  pipeline: Class;
  /** Runs of this pipeline executing at once in this worker. Default: the worker's `concurrency`. */
  concurrency?: number;
}

/** Options of {@link startWorker}. */
export interface WorkerOptions {
  /** The pipelines this worker takes runs of (it fetches only from their queues). */
  pipelines: (Class | WorkerPipeline)[];
  /** Runs executing at once in this process, over all pipelines. Default 4. */
  concurrency?: number;
  /** The queue. Default: the `RUN_QUEUE` binding of the Waypoint's container. */
  queue?: RunQueue;
  /** Base queue name, as given to `enqueue`. Default 'waypoint'. */
  queueName?: string;
  /** Pause between polls of an empty queue. Default 500. */
  pollIntervalMs?: number;
  /** On stop, how long a running step may take to finish before the run pauses without it. Default 10000. */
  gracePeriodMs?: number;
  /** Runs of one `group` executing at once in this worker. Default: no limit. */
  groupConcurrency?: number;
  /** Longest wait before a run found locked by another executor is tried again. Default 30000. */
  lockedRetryMaxMs?: number;
  /** Process signals that stop the worker gracefully (via the shutdown harness). Default SIGTERM, SIGINT; [] for none. */
  signals?: NodeJS.Signals[];
  /**
   * Periodic orphan sweep from this worker: runs left `running` by a vanished executor, and runs whose
   * job is stuck with a worker that died before leasing them (`stuckAfterMs`, default 30 s), are
   * re-enqueued. Default every 20 s, so a dead worker's run is taken up again within the lease TTL plus
   * 20 s (50 s with the defaults); false to leave recovery to the queue's own redelivery (pg-boss: its
   * expiry, 15 min by default) and other sweepers.
   */
  recoverOrphans?: false | { everyMs?: number; olderThanMs?: number; stuckAfterMs?: number };
  /** Called after each delivery is settled (metrics, logs, tests). */
  onSettled?: (event: SettledEvent) => void;
}

/** One settled delivery. */
export interface SettledEvent {
  workerId: string;
  runId: string;
  pipeline: string;
  jobId: string;
  disposition: 'complete' | 'requeue' | 'fail';
  /** `complete` output, requeue reason or failure message. */
  detail: Record<string, unknown>;
}

/** Counters of a worker's settled deliveries. */
export interface WorkerStats {
  fetched: number;
  completed: number;
  requeued: number;
  failed: number;
}

/** A running fleet worker as the runtime hands it out (`FleetWorker` in src/queue implements it). */
export interface FleetWorkerHandle {
  /** This worker's id in logs and events (the lease owner id is the Waypoint's `workerId`). */
  readonly id: string;
  /** Resolves once the worker has stopped and every run it held is settled. */
  readonly stopped: Promise<void>;
  readonly stats: WorkerStats;
  /** Run ids executing in this worker now. */
  running(): string[];
  /** Stops fetching, pauses its runs at the next step boundary and puts them back on the queue. */
  stop(reason?: string): Promise<void>;
}

/** The fleet as the runtime calls it: `waypoint.enqueue`, `waypoint.worker` and `waypoint.close`. */
export interface FleetPort {
  enqueue(host: FleetHost, pipeline: Class, options: EnqueueOptions<unknown>): Promise<EnqueueResult>;
  worker(host: FleetHost, options: WorkerOptions): Promise<FleetWorkerHandle>;
  /** Closes the host's bound run queue, if any. */
  close(host: FleetHost): Promise<void>;
}

/** Container binding of the fleet; the composition root binds the queue's implementation when it is unbound. */
export const FLEET = Symbol.for('waypoint:Fleet') as ServiceIdentifier<FleetPort>;
