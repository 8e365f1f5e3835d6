import { WaypointError, reasonOf } from '../../contract/errors';

/** Two `parallel` branches set the same state property, which has no `@Reducer` to merge them. */
export class ParallelConflictError extends WaypointError {
  readonly property: string;
  readonly branches: [string, string];
  constructor(runId: string, at: string, property: string, first: string, second: string) {
    super(
      'PARALLEL_CONFLICT',
      `Run '${runId}': branches '${first}' and '${second}' of '${at}' both set state property '${property}'. ` +
        `Let only one branch set it, or give the property a @Reducer((current, update) => merged) in the state class. The branches' steps stay recorded.`,
      { runId, step: at },
    );
    this.property = property;
    this.branches = [first, second];
  }
}

/** A `loop` did not reach its `until` condition within `maxIterations`. */
export class LoopLimitError extends WaypointError {
  readonly iterations: number;
  constructor(runId: string, at: string, iterations: number) {
    super(
      'LOOP_LIMIT',
      `Run '${runId}': loop '${at}' ran its maxIterations (${iterations}) without its until condition holding. ` +
        'The run failed with its state and every iteration kept; raise maxIterations or fix the condition, then fork the run.',
      { runId, step: at },
    );
    this.iterations = iterations;
  }
}

/** A `branch` selector returned a key its cases do not have. */
export class UnknownBranchError extends WaypointError {
  readonly key: string;
  constructor(runId: string, at: string, key: unknown, known: readonly string[]) {
    super(
      'UNKNOWN_BRANCH',
      `Run '${runId}': branch '${at}' selected ${JSON.stringify(key) ?? String(key)}, which is not one of its cases (${known.map((k) => `'${k}'`).join(', ')}). ` +
        'Nothing was recorded for the decision; add the case or fix the selector, then resume.',
      { runId, step: at },
    );
    this.key = String(key);
  }
}

/** A selector (`until`, `branch`, `forEach` items, `when`) threw or returned the wrong kind of value. */
export class SelectorError extends WaypointError {
  constructor(runId: string, at: string, what: string, cause?: unknown) {
    super(
      'SELECTOR_FAILED',
      `Run '${runId}': the ${what} of '${at}'${cause instanceof Error ? ` threw: ${reasonOf(cause)}` : ''}. Nothing was recorded for it; fix it and resume.`,
      {
        runId,
        step: at,
        cause,
      },
    );
  }
}

/** One or more items of a `forEach` failed; the other items ran to their end and stay recorded. */
export class ItemFailedError extends WaypointError {
  readonly itemIndex: number;
  constructor(runId: string, at: string, itemIndex: number, cause: unknown) {
    const inner = reasonOf(cause);
    super(
      'ITEM_FAILED',
      `Run '${runId}': item ${itemIndex} of '${at}' failed: ${inner}. The items that completed stay recorded and are not run again on resume: fix the cause and call waypoint.resume('${runId}').`,
      {
        runId,
        step: at,
        cause,
      },
    );
    this.itemIndex = itemIndex;
  }
}
