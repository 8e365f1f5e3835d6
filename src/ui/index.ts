/**
 * The run timeline UI (`waypoint-durable ui`): a small self-contained page and a read-only JSON API over a
 * checkpoint store, with resume / cancel / fork behind `allowActions`.
 *
 * @example
 * import { startUiServer } from 'waypoint-durable';
 * const ui = await startUiServer({ store: waypoint.store, waypoint, pipelines: [FinancialAnalysis] });
 * console.log(ui.url); // http://127.0.0.1:4317/
 */
export { startUiServer, type UiServer, type UiServerOptions } from './server';
export { UiConfigError, UiListenError, UiAssetsMissingError, HttpError } from './errors';
export { analyzeSessions, type ResumePoint, type SessionAnalysis } from '../core/history/sessions';
export type { RunDetailView, RunSummaryView, StepView, ProgressView, IntegrityView } from './run-views';
export type { RunListView } from './read-api';
export type { CheckpointView } from './time-travel';
