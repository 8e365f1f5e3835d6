import type { RunRecord, StepRecord } from '../../contract/checkpoint-store';
import { CheckpointCorruptedError, UndecodableValueError } from '../../contract/errors';
import { deserialize } from '../state/value-decoder';
import type { RowProblem } from './row-integrity';

/*
 * Rows whose digests are right but whose payloads this process cannot read back: what `verify` and the
 * integrity scan report beside the checks of row-integrity.ts.
 */

/**
 * The rows of a run whose payloads (output, memory) this process cannot read back, each as a problem
 * naming its sequence: a row can carry a correct digest and still not decode, when another process or
 * release wrote a value nested deeper than this one reads (see MAX_VALUE_DEPTH), or a writer sealed bad
 * JSON. A load would fail on such a row, so `verify` reports it with the digest problems. Rows in `skip`
 * (sequences already reported) are not decoded. Never throws for what a row holds.
 */
export function undecodableRows(run: Pick<RunRecord, 'runId'>, steps: readonly StepRecord[], skip: ReadonlySet<number> = new Set()): RowProblem[] {
  const problems: RowProblem[] = [];
  steps.forEach((row, index) => {
    if (skip.has(row.sequence)) return;
    const why = undecodable(row.output, 'output') ?? (row.memory === null ? null : undecodable(row.memory, 'agent memory'));
    if (why !== null) problems.push({ index, sequence: row.sequence, error: new CheckpointCorruptedError(run.runId, row.sequence, why) });
  });
  return problems;
}

/** Why the run's stored input cannot be read back by this process (as `undecodableRows`), or null. */
export function undecodableInput(run: Pick<RunRecord, 'input'>): string | null {
  return undecodable(run.input, 'input');
}

function undecodable(text: string, what: string): string | null {
  try {
    deserialize(text);
    return null;
  } catch (error) {
    if (!(error instanceof UndecodableValueError)) throw error;
    // Only what is wrong: the advice of the decode error (run verify) is what this report already is.
    return `its ${what} cannot be read back by this process (${whyUndecodable(error)})`;
  }
}

/** What is wrong with a stored value, from its decode error, without the advice: "it is not valid JSON (...)". */
export function whyUndecodable(error: UndecodableValueError): string {
  return firstSentence(error.message.replace(/^Cannot read a stored value: /, ''));
}

/** The first sentence of `text`, without its period: up to the first '. ' outside parentheses. */
function firstSentence(text: string): string {
  let depth = 0;
  for (let i = 0; i < text.length; i++) {
    if (text[i] === '(') depth++;
    else if (text[i] === ')') depth = Math.max(0, depth - 1);
    else if (text[i] === '.' && depth === 0 && (i === text.length - 1 || text[i + 1] === ' ')) return text.slice(0, i);
  }
  return text;
}
