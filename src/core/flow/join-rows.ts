import type { StepRecord } from '../../contract/checkpoint-store';
import type { FlowNode } from '../plan/plan-types';
import { SYSTEM_AGENT } from '../history/row-integrity';
import { defineData, deserialize } from '../state/value-decoder';

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

/**
 * The key under which a merge row keeps the reducer properties it records as a change to their previous
 * value instead of whole: a list that kept its previous items and added some (`{ from, items }`), an object
 * that kept its previous entries and added or replaced some (`{ set }`). Without it a reducer list growing
 * by 1 KB a step wrote its whole length again at every step (its rows grew with the run, quadratic in all).
 */
export const MERGE_DELTA = '$waypoint.delta';

/** `update: true`: the items added are the step's own update of the property (its row holds them; the usual `concat`). */
type MergeDelta = { from: number; items: unknown[] } | { from: number; update: true } | { set: Record<string, unknown> };

/**
 * A merge row's values from the merged reducer values of a step, the values they reduced (`before`) and the
 * step's update: unchanged items are left out where the merged value extends the previous one (same items by
 * identity), and items that are the update's own are named, not repeated.
 *
 * @example
 * mergeRowValues({ log: ['a', 'b', 'c'] }, { log: prev }, { log: added }); // { '$waypoint.delta': { log: { from: 2, update: true } } } when prev is ['a', 'b'] and added ['c'] (the same items)
 */
export function mergeRowValues(merged: Record<string, unknown>, before: Record<string, unknown>, update: Record<string, unknown>): Record<string, unknown> {
  if (Object.prototype.hasOwnProperty.call(merged, MERGE_DELTA)) return merged; // a property of that name: whole values only
  const out: Record<string, unknown> = {};
  let deltas: Record<string, MergeDelta> | undefined;
  for (const key of Object.keys(merged)) {
    const delta = deltaOf(before[key], merged[key], update[key]);
    if (delta) (deltas ??= {})[key] = delta;
    else defineData(out, key, merged[key]);
  }
  if (deltas) defineData(out, MERGE_DELTA, deltas);
  return out;
}

function deltaOf(previous: unknown, merged: unknown, added: unknown): MergeDelta | null {
  if (Array.isArray(previous) && Array.isArray(merged)) {
    if (merged.length < previous.length || previous.length === 0) return null;
    for (let i = 0; i < previous.length; i++) if (merged[i] !== previous[i]) return null;
    const from = previous.length;
    if (Array.isArray(added) && merged.length === from + added.length && added.every((item, i) => merged[from + i] === item)) return { from, update: true };
    return { from, items: merged.slice(from) };
  }
  if (!isPlainObject(previous) || !isPlainObject(merged)) return null;
  const kept = Object.keys(previous);
  if (kept.length === 0) return null;
  for (const key of kept) if (!Object.prototype.hasOwnProperty.call(merged, key)) return null;
  const set: Record<string, unknown> = {};
  for (const key of Object.keys(merged)) if (merged[key] !== previous[key]) defineData(set, key, merged[key]);
  return { set };
}

function isPlainObject(value: unknown): value is Record<string, unknown> {
  if (value === null || typeof value !== 'object' || Array.isArray(value)) return false;
  const proto = Object.getPrototypeOf(value) as unknown;
  return proto === Object.prototype || proto === null;
}

/**
 * The whole merged values a merge row's output stands for, given the values its step's properties had before
 * the step (`before`) and the step's update (`update`, its row's output). Throws when a delta does not fit them (rows out of order, a row not of this run).
 *
 * @example
 * mergedValues(deserialize(row.output), before, stepUpdate); // { log: ['a', 'b', 'c'] }
 */
export function mergedValues(output: Record<string, unknown>, before: Record<string, unknown>, update: Record<string, unknown>): Record<string, unknown> {
  const deltas = output[MERGE_DELTA];
  if (!Object.prototype.hasOwnProperty.call(output, MERGE_DELTA) || !isDeltas(deltas)) return output; // whole values (a property of that name included)
  const out: Record<string, unknown> = {};
  for (const key of Object.keys(output)) if (key !== MERGE_DELTA) defineData(out, key, output[key]);
  for (const key of Object.keys(deltas)) {
    const delta = deltas[key];
    const previous = before[key];
    if ('from' in delta) {
      if (!Array.isArray(previous) || previous.length !== delta.from)
        throw misfit(`'${key}' extends a list of ${delta.from} items, but the state before its step holds ${describeLength(previous)}`);
      const items = 'items' in delta ? delta.items : update[key];
      if (!Array.isArray(items)) throw misfit(`'${key}' adds its step's update, but the step's row holds ${describeLength(items)} for it`);
      defineData(out, key, previous.concat(items));
    } else {
      if (!isPlainObject(previous)) throw misfit(`'${key}' adds entries to an object, but the state before its step holds ${describeLength(previous)}`);
      defineData(out, key, Object.assign({ ...previous }, delta.set));
    }
  }
  return out;
}

function isDeltas(value: unknown): value is Record<string, MergeDelta> {
  if (!isPlainObject(value)) return false;
  return Object.values(value).every(
    (d) => isPlainObject(d) && (('from' in d && typeof d.from === 'number' && (Array.isArray(d.items) || d.update === true)) || ('set' in d && isPlainObject(d.set))),
  );
}

/** A merge row that does not fit the state before its step. */
function misfit(why: string): Error {
  // plain Error: the fold that reads the row (checkpoint-manager.ts, mergedOf) rethrows it as CHECKPOINT_CORRUPTED with the run and the sequence.
  return new Error(`merge row: ${why}`);
}

function describeLength(value: unknown): string {
  return Array.isArray(value) ? `a list of ${value.length}` : value === undefined ? 'nothing' : typeof value;
}
