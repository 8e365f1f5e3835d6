/**
 * LangGraph.js integration: a checkpointer on Waypoint's storage. Requires the optional peer
 * dependencies `@langchain/langgraph-checkpoint` and `@langchain/core`.
 *
 * @example
 * import { WaypointCheckpointSaver } from 'waypoint-durable/langgraph';
 * const checkpointer = new WaypointCheckpointSaver({ store: new TypeOrmCheckpointStore({ type: 'sqlite' }) });
 */
export { WaypointCheckpointSaver, type WaypointCheckpointSaverOptions, type LangGraphRetention } from './checkpoint-saver';
export type { LangGraphRedisOptions } from './redis-backend';
export { LangGraphCheckpointCorruptedError, LangGraphConfigError, LangGraphParentMissingError, type CheckpointLocation } from './errors';
export type { PruneResult, ThreadInfo } from './records';
