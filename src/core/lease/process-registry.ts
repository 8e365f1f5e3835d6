import type { CheckpointStore } from '../../contract/checkpoint-store';

/**
 * What this process is, for the one-executor-per-run rule, across every Waypoint instance in it: the
 * lease owner ids alive here, and the runs being advanced here right now. Held on `globalThis` under a
 * registered symbol, so two copies of this module in one process (two installs of the package, a bundled
 * and an unbundled copy) share one registry instead of each trusting only itself.
 */
interface ProcessRegistry {
  /** Lease owner id -> how many holders (Waypoint instances, held leases) keep it alive. */
  readonly liveWorkers: Map<string, number>;
  /** Store location -> run id -> worker id advancing it. */
  readonly runsByLocation: Map<string, Map<string, string>>;
  /** The same, for stores that cannot name their location (each object its own database). */
  readonly runsByStore: WeakMap<CheckpointStore, Map<string, string>>;
  /** Run id -> the lease checks of its executors in this process (a cancel here asks them to look at once). */
  leaseChecks: Map<string, Set<() => void>>;
}

const REGISTRY = Symbol.for('waypoint.process-registry.v1');

function registry(): ProcessRegistry {
  const holder = globalThis as typeof globalThis & { [REGISTRY]?: ProcessRegistry };
  const reg = (holder[REGISTRY] ??= { liveWorkers: new Map(), runsByLocation: new Map(), runsByStore: new WeakMap(), leaseChecks: new Map() });
  // A registry made by an earlier copy of this module lacks the later fields.
  reg.leaseChecks ??= new Map();
  return reg;
}

/**
 * Marks lease owner `workerId` as alive in this process until the returned function is called (each
 * registration counts; calling the function twice releases once). `holderIsDead` never judges a
 * registered id dead, whatever pid it carries.
 *
 * @example
 * const unregister = registerLiveWorker(workerId);
 * try { ...hold leases as workerId... } finally { unregister(); }
 */
export function registerLiveWorker(workerId: string): () => void {
  const live = registry().liveWorkers;
  live.set(workerId, (live.get(workerId) ?? 0) + 1);
  let done = false;
  return () => {
    if (done) return;
    done = true;
    const left = (live.get(workerId) ?? 1) - 1;
    if (left > 0) live.set(workerId, left);
    else live.delete(workerId);
  };
}

/** True while some Waypoint or held lease of this process uses `workerId` (see {@link registerLiveWorker}). */
export function isLiveWorker(workerId: string): boolean {
  return registry().liveWorkers.has(workerId);
}

/**
 * Run ids this process is advancing against the database of `store` right now, with the worker id
 * advancing each. Two store objects on one database (two Waypoints in one process) share one map
 * through `store.location`; a store without a location has a map of its own.
 */
export function activeRuns(store: CheckpointStore): Map<string, string> {
  const { runsByLocation, runsByStore } = registry();
  const location = store.location;
  let runs = location === undefined ? runsByStore.get(store) : runsByLocation.get(location);
  if (!runs) {
    runs = new Map();
    if (location === undefined) runsByStore.set(store, runs);
    else runsByLocation.set(location, runs);
  }
  return runs;
}

/**
 * Registers `check` as a way to make the executor of run `runId` in this process check its lease now
 * rather than at its next heartbeat; the returned function removes it.
 *
 * @example
 * const unregister = registerLeaseCheck(runId, () => void keeper.renewNow());
 */
export function registerLeaseCheck(runId: string, check: () => void): () => void {
  const checks = registry().leaseChecks;
  let set = checks.get(runId);
  if (!set) checks.set(runId, (set = new Set()));
  set.add(check);
  return () => {
    set.delete(check);
    if (set.size === 0 && checks.get(runId) === set) checks.delete(runId);
  };
}

/**
 * Asks every executor of run `runId` in this process to check its lease at once: after a cancel (which
 * bumps the lease epoch), the executor finds its lease gone and aborts the running step's `ctx.signal`
 * now instead of at its next heartbeat. Executors in other processes notice at their next heartbeat.
 *
 * @example
 * await store.cancelRun(runId, hint); checkLeasesNow(runId);
 */
export function checkLeasesNow(runId: string): void {
  for (const check of registry().leaseChecks.get(runId) ?? []) check();
}
