/**
 * `waypoint-durable/queue`: running a fleet (enqueue runs, worker processes, orphan recovery) on pg-boss
 * or BullMQ. The queue client (an optional peer) loads when a queue is constructed.
 *
 * @example
 * import { enqueue, startWorker, pgBossQueue } from 'waypoint-durable/queue';
 */
export * from '../queue/index';
