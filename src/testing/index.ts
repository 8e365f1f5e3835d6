/**
 * `waypoint-durable/testing`: the checkpoint store conformance suite every Waypoint backend passes, for
 * the author of a new store (DynamoDB, MySQL, ...) to run against theirs, and the record builders its
 * cases use. Runs on `node:test` (built into Node); nothing here is loaded by the package root.
 *
 * @example
 * // my-store.test.ts, run with `node --test`
 * import { runStoreConformance } from 'waypoint-durable/testing';
 * runStoreConformance({ name: 'my-store', makeStore: async () => { const store = new MyStore(); return { store, cleanup: () => store.close() }; }, processLocal: true });
 */
export { runStoreConformance } from './conformance';
export type { StoreConformanceOptions, StoreFixture } from './fixture';
export { newRun, stepRecord, cursorAt, leasedRun, appendSteps, withCode } from './store-records';
export { runArchiveSinkConformance, type ArchiveSinkConformanceOptions, type ArchiveSinkFixture } from './conformance-archive';
export { crashTest, type CrashTestOptions } from './kit/crash-test';
export type { CrashReport, CrashProblem, EffectExecutions, PointOutcome } from './kit/crash-report';
export type { CrashPoint } from './kit/crash-trace';
export { testEnvironment, type TestEnvironment, type TestEnvironmentOptions, type RecordedStep, type RecordedEffect } from './kit/test-environment';
export { TestClock } from './kit/test-clock';
export type { CrashPointKind } from '../core/step/crash-points';
export type { Class } from '../decorators/class-type';
export type { Clock } from '../contract/clock';
export type { RunStatus } from '../contract/checkpoint-store';
