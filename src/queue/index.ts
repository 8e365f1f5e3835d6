/**
 * Running a fleet: enqueue runs, start worker processes that take them from a queue (pg-boss on
 * PostgreSQL, or BullMQ on Redis), recover orphaned runs.
 *
 * @example
 * import { enqueue, startWorker, pgBossQueue, closeQueue } from './queue'; // re-exported by the package root once wired
 * const waypoint = await Waypoint.create({ modules: [postgresStorage({ url }), pgBossQueue({ url })] });
 * await enqueue(waypoint, FinancialAnalysis, { runId: 'q3-aapl', input: { ticker: 'AAPL' } });
 * const worker = await startWorker(waypoint, { pipelines: [FinancialAnalysis], concurrency: 4 });
 */
export {
  RunQueue,
  RUN_QUEUE,
  DEFAULT_QUEUE,
  queueNameFor,
  jobIdFor,
  redispatchIdFor,
  type RunJob,
  type RunJobKind,
  type ActiveJob,
  type Delivery,
  type SendOptions,
  type QueueCounts,
} from '../contract/run-queue';
export { PgBossRunQueue, pgBossQueue, type PgBossQueueOptions } from './pg-boss-queue';
export { BullMqRunQueue, bullmqQueue, type BullMqQueueOptions } from './bullmq-queue';
export { enqueue, resolveQueue, closeQueue, type EnqueueOptions, type EnqueueResult } from './enqueue';
export { startWorker, FleetWorker, type WorkerOptions, type WorkerPipeline, type WorkerStats, type SettledEvent } from './fleet-worker';
export { advanceDelivery, type Disposition, type AdvanceContext } from './run-dispatch';
export {
  recoverOrphans,
  startOrphanSweeper,
  isOrphan,
  isStuckDelivery,
  UNLEASED_GRACE_MS,
  STUCK_DELIVERY_MS,
  type RecoverOrphansOptions,
  type OrphanAction,
  type OrphanSweeper,
} from './orphans';
export { QueueUnavailableError, QueueNotConfiguredError } from './errors';
export { queueFleet } from './fleet';
