import type { CheckpointStore } from '../../src/index';

/**
 * Counts the step rows the store hands out (`loadRun`, `listSteps`) while `counting` is on: how many rows a
 * resume or a view read.
 *
 * @example
 * const counter = countRows(waypoint.store);
 * counter.counting = true; await waypoint.get(runId); counter.counting = false; // counter.rows
 */
export function countRows(store: CheckpointStore): { rows: number; counting: boolean } {
  const counter = { rows: 0, counting: false };
  const loadRun = store.loadRun.bind(store);
  const listSteps = store.listSteps.bind(store);
  store.loadRun = async (runId) => {
    const loaded = await loadRun(runId);
    if (counter.counting) counter.rows += loaded?.steps.length ?? 0;
    return loaded;
  };
  store.listSteps = async (runId, range) => {
    const rows = await listSteps(runId, range);
    if (counter.counting) counter.rows += rows.length;
    return rows;
  };
  return counter;
}
