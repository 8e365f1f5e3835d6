import type { StepRecord } from '../../contract/checkpoint-store';
import type { FlowNode } from '../plan/plan-types';
import { SYSTEM_AGENT } from '../history/row-integrity';
import { deserialize } from '../state/value-decoder';

/*
 * What makes a control-flow run's state derivable from its rows alone (issue 36, "the rows are the truth").
 *
 * A `parallel` branch and a `forEach` item run on frames of their own: what they leave in the enclosing
 * state is a join (branches in declaration order, items into `state[into]`, reducers merging), which the
 * interpreter computes. Such a construct ends with a `$waypoint/join` row at `<construct path>#join`
 * whose output is every property the join changed, with the value it had after the join (after reducers).
 * Loops and branch cases run on the enclosing frame: their steps' rows fold where they are. A step on the
 * run's own frame whose update reaches a `@Reducer` property is followed by a `$waypoint/merge` row at
 * `<step path>#merge` with those properties' merged values, so a reader needs no reducer.
 *
 * A run records this from its creation on: its metadata names, under `joins`, the labels of the
 * constructs whose parts run on frames of their own (a reader cannot tell a named parallel from a named
 * loop by its label). A run without that key was written by an earlier release (or is a straight line).
 */

/** The run-metadata key that marks a run whose rows hold its joins; its value is a JSON list of construct labels. */
export const JOINS_KEY = 'joins';

/** Path suffixes of the join row of a construct and the merge row of a step. */
export const JOIN = '#join';
export const MERGE = '#merge';

/** The labels of the constructs of `flow` whose parts run on frames of their own (parallels and forEaches). */
export function joinLabels(flow: FlowNode | undefined): string[] {
  const labels: string[] = [];
  const walk = (node: FlowNode | null | undefined): void => {
    if (!node) return;
    switch (node.kind) {
      case 'agent':
        return;
      case 'sequence':
        return node.children.forEach(walk);
      case 'parallel':
        labels.push(node.label);
        return node.branches.forEach(walk);
      case 'loop':
        return walk(node.body);
      case 'branch':
        return [...node.cases.values()].forEach(walk);
      case 'forEach':
        labels.push(node.label);
        return walk(node.body);
    }
  };
  walk(flow);
  return labels;
}

/** The join labels a run's metadata records; null for a run written without join rows (an earlier release, a straight line). */
export function joinsOf(metadata: string): ReadonlySet<string> | null {
  let meta: Record<string, string> | null;
  try {
    meta = deserialize<Record<string, string> | null>(metadata);
  } catch {
    return null;
  }
  const text = meta?.[JOINS_KEY];
  if (typeof text !== 'string') return null;
  try {
    const labels = JSON.parse(text) as unknown;
    return Array.isArray(labels) ? new Set(labels.filter((l): l is string => typeof l === 'string')) : null;
  } catch {
    return null;
  }
}

/** The `joins` entry of a run's metadata, to carry over to a run made from its rows (a fork); empty when it has none. */
export function joinsEntry(metadata: string): Record<string, string> {
  const joins = joinsOf(metadata);
  return joins ? { [JOINS_KEY]: JSON.stringify([...joins]) } : {};
}

const PART = /^(.*)\[[^\]]*\]$/;

/**
 * True when a row lies inside a part of a construct that runs on a frame of its own (`parallel[1]/...`,
 * `forEach(files)[3]/...`, at any depth): its values reach the run's state through that construct's join
 * row, never by themselves.
 */
export function insideJoin(row: Pick<StepRecord, 'path'>, joins: ReadonlySet<string>): boolean {
  const path = row.path;
  if (!path) return false;
  const segments = path.split('/');
  for (let i = 0; i < segments.length - 1; i++) {
    const part = PART.exec(segments[i]);
    if (part && joins.has(part[1])) return true;
  }
  return false;
}

/** True for a join or merge row (a system row this module describes). */
export function isJoinRow(row: Pick<StepRecord, 'agentId' | 'stepName'>): boolean {
  return row.agentId === SYSTEM_AGENT && (row.stepName === 'join' || row.stepName === 'merge');
}
