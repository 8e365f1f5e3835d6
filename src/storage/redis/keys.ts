import type { RunStatus } from '../../contract/checkpoint-store';

/** Default key prefix: every key the Redis store touches starts with it. */
export const DEFAULT_KEY_PREFIX = 'waypoint:';

/**
 * Every run status, for index maintenance (an expired run's status is unknown, so its entry is removed
 * from all status indexes). Typed as a record so adding a status to `RunStatus` fails compilation here.
 */
const STATUS_SET: Record<RunStatus, true> = { running: true, paused: true, waiting: true, completed: true, failed: true, cancelled: true };
export const ALL_STATUSES = Object.keys(STATUS_SET) as RunStatus[];

/** What a run's key is followed by in its events key (the retention script builds it from the run key). */
export const EVENTS_SUFFIX = ':events';

/**
 * The key names of the Redis checkpoint store, as pure functions of a prefix. All of a run's own keys
 * carry the hash tag `{runId}`, so on a Redis Cluster they land in one slot.
 *
 * Layout (prefix `waypoint:`):
 * - `waypoint:run:{id}`: hash, the run record (snake_case fields, times in epoch ms).
 * - `waypoint:run:{id}:steps`: hash, one field per step: sequence -> JSON of the step record (short keys, codec.ts).
 * - `waypoint:run:{id}:ops`: list of the run's operation keys, in creation order.
 * - `waypoint:run:{id}:events`: stream, the run's output events; the entry id of offset n is `<n + 1>-0`
 *   (streams.ts). The scripts that expire a run's keys name it as the run key + `:events` (`EVENTS_SUFFIX`).
 * - `waypoint:op:<operationKey>`: hash, one committed-operations log record (looked up by key alone).
 * - `waypoint:idx:runs`, `waypoint:idx:status:<status>`, `waypoint:idx:pipeline:<name>`: sorted sets of
 *   run ids scored by updated_at (ms), so listing never scans the keyspace.
 * - `waypoint:idx:parent:<parentRunId>`: sorted set of a run's child runs, scored by created_at (ms):
 *   written once when the child is created, so a step append never touches it.
 *
 * The literal segments after the prefix (`run:{`, `op:`, `idx:`) differ, and the per-run suffixes
 * (``, `:steps`, `:ops`, `:events`) are none a suffix of another nor end in `}`, so no two ids can produce the same key.
 *
 * @example
 * const keys = redisKeys('myapp:');
 * keys.run('q3-aapl');       // 'myapp:run:{q3-aapl}'
 * keys.steps('q3-aapl');     // 'myapp:run:{q3-aapl}:steps'
 */
export interface RedisKeys {
  readonly prefix: string;
  run(runId: string): string;
  steps(runId: string): string;
  runOperations(runId: string): string;
  /** The run's output stream (a Redis stream). */
  events(runId: string): string;
  operation(operationKey: string): string;
  runsIndex(): string;
  statusIndex(status: RunStatus): string;
  pipelineIndex(pipelineName: string): string;
  /** The child runs of a run (`listRuns({ parentRunId })`), scored by creation time. */
  parentIndex(parentRunId: string): string;
  /**
   * Key stems the Lua scripts complete with a value they read inside the script (a run's stored
   * pipeline name, its previous status, an operation key from the run's list). Each equals the builder
   * above applied to '' (unit-tested), so key naming stays in this file.
   */
  readonly stems: { status: string; pipeline: string; operation: string; parent: string };
}

/** Builds the key names for one prefix (default 'waypoint:'). */
export function redisKeys(prefix: string = DEFAULT_KEY_PREFIX): RedisKeys {
  const run = (runId: string): string => `${prefix}run:{${runId}}`;
  return {
    prefix,
    run,
    steps: (runId) => `${run(runId)}:steps`,
    runOperations: (runId) => `${run(runId)}:ops`,
    events: (runId) => `${run(runId)}${EVENTS_SUFFIX}`,
    operation: (operationKey) => `${prefix}op:${operationKey}`,
    runsIndex: () => `${prefix}idx:runs`,
    statusIndex: (status) => `${prefix}idx:status:${status}`,
    pipelineIndex: (pipelineName) => `${prefix}idx:pipeline:${pipelineName}`,
    parentIndex: (parentRunId) => `${prefix}idx:parent:${parentRunId}`,
    stems: { status: `${prefix}idx:status:`, pipeline: `${prefix}idx:pipeline:`, operation: `${prefix}op:`, parent: `${prefix}idx:parent:` },
  };
}
