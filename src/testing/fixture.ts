import type { CheckpointStore } from '../contract/checkpoint-store';

/** What a backend's test file hands the conformance suite for each test. */
export interface StoreFixture {
  /** A store NOT yet initialized: the suite calls `init()` itself (and tests concurrent inits). */
  store: CheckpointStore;
  /** Closes every store the fixture made and removes their data (temp file, schema, key prefix). */
  cleanup: () => Promise<void>;
  /** Another store over the same database, not initialized. Absent for process-local backends (memory). */
  sibling?: () => CheckpointStore;
  /**
   * The store under a payload-sealing wrapper (`EncryptingCheckpointStore`), when `store` is one: the
   * stream cases then check that no part's data reaches it in clear text. Absent for a plain store.
   */
  inner?: CheckpointStore;
}

/** How to run the conformance suite against one backend. */
export interface StoreConformanceOptions {
  /** Names the suite in the test output (`<name>: checkpoint store conformance`) and prefixes each test name. */
  name: string;
  /** A fresh, uninitialized store for one test, isolated by `testName`; the suite always calls its `cleanup`. */
  makeStore: (testName: string) => Promise<StoreFixture>;
  /**
   * The store keeps its data in the process (nothing to share between two instances, like the memory
   * store): the case of two stores initializing one database is not registered and `sibling` is not needed.
   */
  processLocal?: boolean;
}

/** Calls `fn` with a fresh, initialized store and always cleans up. Shared by the case files. */
export type StoreTest = (title: string, fn: (fx: StoreFixture) => Promise<void>) => void;
