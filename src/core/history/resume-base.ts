import type { CheckpointStore, Fence, LoadedRun, OperationRecord, StepRecord } from '../../contract/checkpoint-store';
import type { Clock } from '../../contract/clock';
import type { ChildStateReader } from '../flow/flow-executor';
import type { PipelinePlan } from '../plan/plan-types';
import { serialize } from '../state/serializer';
import { baseAtBoundary } from './boundary-base';
import { compactPaths } from './path-runs';
import { hasForEach, snapshotItems } from './run-progress';
import { firstInvalidStep, linkOf, runIdentity, SYSTEM_AGENT, systemRow, verifySteps, type Integrity } from './row-integrity';

/**
 * Resume snapshots (issue 40): a resume reads the run row, the run's newest resume snapshot and the rows
 * after it, not every row, so the time to a resumed run's first new step does not grow with the run.
 *
 * A snapshot is a base row (the same payload retention's compaction writes: state, memories, completed
 * steps, the tree's position at a top-level boundary) that replaces no row: the step log stays whole, so
 * time travel, `runs show` and the page read what they read before. It is kept in the run's operations
 * log under a key of its own (`resumeBaseKey`), written fenced by the run's executor every
 * `RESUME_BASE_EVERY` rows, from the previous snapshot and the rows after it (O(rows since) work, not
 * O(run)). The operations log is part of every store's contract, so every store (a user's own included)
 * gets this with no new method; the record is never `committed`, so each snapshot overwrites the last.
 *
 * A snapshot is a cache, never the truth: whenever it does not fit the rows (a truncation since, a
 * compaction past it, a digest that does not match, a payload that no longer opens), the resume reads
 * every row, exactly as before.
 */

/**
 * Rows between two resume snapshots of a run (a snapshot is taken at the first top-level boundary past each
 * multiple). `WAYPOINT_RESUME_BASE_EVERY` overrides it for tests (the crash tests take one every few rows).
 */
export const RESUME_BASE_EVERY = everyFrom(process.env.WAYPOINT_RESUME_BASE_EVERY);

function everyFrom(text: string | undefined): number {
  const n = Number(text);
  return Number.isInteger(n) && n > 0 ? n : 500;
}

/** The operation name of resume snapshots: readers that list a run's side effects leave these records out. */
export const RESUME_BASE_OPERATION = '$waypoint.resume-base';

/** The operations-log key of run `runId`'s resume snapshot. */
export function resumeBaseKey(runId: string): string {
  return `$waypoint/resume-base/${runId}`;
}

/**
 * True for the records the runtime keeps in the operations log for itself (resume snapshots), not side effects.
 *
 * @example
 * const effects = (await store.listOperations(runId)).filter((op) => !isRuntimeOperation(op));
 */
export function isRuntimeOperation(op: Pick<OperationRecord, 'name'>): boolean {
  return op.name === RESUME_BASE_OPERATION;
}

/** What a resume read: the rows it restores from, and how many of the run's rows it did not have to read. */
export interface ResumableRun extends LoadedRun {
  /** True when the rows start at a resume snapshot (the rows before it were not read). */
  fromSnapshot: boolean;
}

/**
 * The rows a resume needs: with a snapshot that fits, the run row, the snapshot as a base row and the rows
 * after it (3 store calls: `getRun`, `getOperation`, `listSteps` of the tail); else `loadRun` (every row).
 *
 * @example
 * const loaded = await loadResumable(store, 'q3-aapl', {}); // loaded.steps[0] is the snapshot when fromSnapshot
 */
export async function loadResumable(store: CheckpointStore, runId: string, integrity: Integrity): Promise<ResumableRun | null> {
  const [run, op] = await Promise.all([store.getRun(runId), store.getOperation(resumeBaseKey(runId)).catch(() => null)]);
  if (!run) return null;
  const base = op?.runId === runId ? parseBase(op.result, runId) : null;
  if (base && base.sequence <= run.lastSequence) {
    // From the snapshot's own sequence: that row must still be the one the snapshot replaces.
    const rows = await store.listSteps(runId, { fromSequence: base.sequence, toSequence: run.lastSequence });
    const at = rows[0];
    if (at && at.sequence === base.sequence && linkOf(at) === linkOf(base)) {
      const tail: LoadedRun = { run, steps: [base, ...rows.slice(1)] };
      if (firstInvalidStep(run, tail.steps, integrity) === null) return { ...tail, fromSnapshot: true };
    }
  }
  const loaded = await store.loadRun(runId);
  return loaded ? { ...loaded, fromSnapshot: false } : null;
}

/** The stored snapshot as a base row, or null when it is missing or not one (a cache: never an error). */
function parseBase(text: string | null, runId: string): StepRecord | null {
  if (!text) return null;
  try {
    const row = JSON.parse(text) as StepRecord & { startedAt: string; completedAt: string };
    if (row.runId !== runId || row.agentId !== SYSTEM_AGENT || row.stepName !== 'base' || typeof row.sequence !== 'number') return null;
    return { ...row, startedAt: new Date(row.startedAt), completedAt: new Date(row.completedAt) };
  } catch {
    return null;
  }
}

/**
 * Takes a run's resume snapshot at the latest top-level boundary of its stored rows (read from the last
 * snapshot on), under the executor's fence. Returns the snapshot's sequence, or null when there is no new
 * boundary to take it at (inside a long construct: the previous snapshot stays).
 */
export async function takeResumeBase(
  parts: { store: CheckpointStore; clock: Clock; integrity: Integrity },
  plan: PipelinePlan,
  runId: string,
  fence: Fence,
  childState?: ChildStateReader,
): Promise<number | null> {
  const loaded = await loadResumable(parts.store, runId, parts.integrity);
  if (!loaded || loaded.steps.length < 2 || loaded.run.pipelineVersion !== plan.version) return null;
  const { run, steps } = loaded;
  // A tail read from a snapshot was checked on the way; every row (no snapshot fits) is checked here.
  if (!loaded.fromSnapshot) verifySteps(run, steps, parts.integrity);
  const found = await baseAtBoundary(plan, loaded, steps[steps.length - 1].sequence, parts.integrity, childState);
  if (!found) return null;
  const last = found.folded[found.folded.length - 1];
  if (found.previous && last.sequence <= found.previous.sequence) return null;
  // The items of the item lists it folds, for the progress read from it (a figure the folded decisions held).
  const children = hasForEach(plan.flow, true) ? await parts.store.listRuns({ parentRunId: runId }) : [];
  const items = hasForEach(plan.flow) ? snapshotItems(run, found.folded, plan, children) : undefined;
  const base = systemRow(
    runId,
    last.sequence,
    'base',
    // The completed paths in runs, and runs of runs (a 20,000-step run's are a few entries): the snapshot stays small as the run grows.
    serialize(
      {
        ...found.payload,
        completed: [],
        completedRuns: found.completed,
        ...(found.payload.flow ? { flow: { ...found.payload.flow, doneKeys: [], doneKeyRuns: compactPaths(found.payload.flow.doneKeys) } } : {}),
        ...(items === undefined ? {} : { items }),
      },
      { runId, what: 'resume snapshot', wrapping: 1 },
    ),
    serialize(Object.fromEntries(found.memories)),
    parts.clock.now(),
    parts.integrity,
    { identity: runIdentity(run), prev: '' },
  );
  await parts.store.writeOperation(
    {
      operationKey: resumeBaseKey(runId),
      runId,
      stepKey: RESUME_BASE_OPERATION,
      name: RESUME_BASE_OPERATION,
      state: 'started',
      result: JSON.stringify(base),
      error: null,
      attempts: 1,
    },
    { fence },
  );
  return base.sequence;
}
