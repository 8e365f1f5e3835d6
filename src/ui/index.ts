/**
 * The run timeline UI (`waypoint-durable ui`): a small self-contained page and a read-only JSON API over a
 * checkpoint store, with resume / cancel / fork behind `allowActions`.
 *
 * @example
 * import { startUiServer } from 'waypoint-durable';
 * const ui = await startUiServer({ store: waypoint.store, waypoint, pipelines: [FinancialAnalysis] });
 * console.log(ui.url); // http://127.0.0.1:4317/
 */
import type { UiServer, UiServerOptions } from './server';

export type { UiServer, UiServerOptions } from './server';
export { UiConfigError, UiListenError, UiAssetsMissingError, HttpError } from './errors';
export { analyzeSessions, type ResumePoint, type SessionAnalysis } from '../core/history/sessions';
export type { RunDetailView, RunSummaryView, StepView, ProgressView, IntegrityView } from './run-views';
export type { RunListView } from './read-api';
export type { CheckpointView } from './time-travel';

/**
 * Starts the run timeline UI: a self-contained page and its JSON API over a checkpoint store. The server
 * and its page assets load here, on the first call, not when Waypoint is imported: a program that never
 * starts the UI does not pay for them.
 *
 * @example
 * const ui = await startUiServer({ store: waypoint.store, waypoint, pipelines: [FinancialAnalysis], allowActions: true });
 * console.log(`Waypoint UI at ${ui.url}`);
 * process.once('SIGINT', () => void ui.close());
 */
export function startUiServer(options: UiServerOptions): Promise<UiServer> {
  // eslint-disable-next-line @typescript-eslint/no-require-imports -- deferred to the first call, to keep the server off every program's start
  const server = require('./server') as typeof import('./server');
  return server.startUiServer(options);
}
