import { afterEach, beforeEach } from 'node:test';
import type { Waypoint } from '../../src/index';
import { tempSqlitePath } from '../helpers/sqlite-temp';
import { openWaypoint, resetModel, scenario } from './ai-agent';

/**
 * Each test of the calling file on a fresh SQLite Waypoint for the research agent, with streamed model
 * calls and the scenario's defaults (as they were when this was called); `use` receives the test's Waypoint.
 *
 * @example
 * let waypoint: Waypoint;
 * eachTestOnSqlite((w) => (waypoint = w));
 */
export function eachTestOnSqlite(use: (waypoint: Waypoint) => void): void {
  const defaults = { ...scenario };
  let waypoint: Waypoint | undefined;
  let removeFile = () => undefined as void;
  beforeEach(async () => {
    Object.assign(scenario, defaults, { stream: true });
    resetModel();
    const { file, remove } = tempSqlitePath();
    removeFile = remove;
    waypoint = await openWaypoint({ kind: 'sqlite', file });
    use(waypoint);
  });
  afterEach(async () => {
    await waypoint?.close();
    removeFile();
  });
}
