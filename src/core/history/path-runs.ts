/**
 * A compact form of a long, ordered list of step paths (a resume snapshot's `completed`): consecutive paths
 * that differ only in one number, counting up by one (`Big.s0`, `Big.s1`, ... or `loop[0]/Tick.tick`,
 * `loop[1]/Tick.tick`, ...), are kept as one run `[prefix, from, to, suffix]`, so a snapshot of a 20,000-step
 * straight line or a 20,000-iteration loop holds a few entries, not 20,000 paths. Order is kept exactly.
 */

/** Paths `${prefix}${i}${suffix}` for i from `from` to `to`, in that order. */
export type PathRun = [prefix: string, from: number, to: number, suffix: string];

/**
 * Runs of runs: for each `a` from `a0` to `a1` (the k-th, k = a - a0), the run
 * `[`${head}${a}${mid}`, from0 + k * stride, from0 + k * stride + len - 1, suffix]`. A line of agents that
 * each hold a stretch of numbered steps (`Agent0.s0`..`Agent0.s49`, `Agent1.s50`..) is one grid, not one
 * run per agent.
 */
export type PathGrid = [head: string, a0: number, a1: number, mid: string, from0: number, stride: number, len: number, suffix: string];

/** One path, a run of them, or a grid of runs. */
export type PathEntry = string | PathRun | PathGrid;

/**
 * @example
 * compressPaths(['A.s0', 'A.s1', 'A.s2', 'B.x']) // [['A.s', 0, 2, ''], 'B.x']
 */
export function compressPaths(paths: readonly string[]): Array<string | PathRun> {
  const out: Array<string | PathRun> = [];
  let i = 0;
  while (i < paths.length) {
    const split = i + 1 < paths.length ? stepBetween(paths[i], paths[i + 1]) : null;
    if (!split) {
      out.push(paths[i]);
      i += 1;
      continue;
    }
    const [prefix, from, suffix] = split;
    let to = from + 1;
    i += 2;
    while (i < paths.length && paths[i] === `${prefix}${to + 1}${suffix}`) {
      to += 1;
      i += 1;
    }
    out.push([prefix, from, to, suffix]);
  }
  return out;
}

/**
 * @example
 * expandPaths([['A.s', 0, 2, ''], 'B.x']) // ['A.s0', 'A.s1', 'A.s2', 'B.x']
 */
export function expandPaths(entries: readonly PathEntry[]): string[] {
  const out: string[] = [];
  for (const entry of entries) {
    for (const run of runsOf(entry)) {
      if (typeof run === 'string') out.push(run);
      else for (let n = run[1]; n <= run[2]; n++) out.push(`${run[0]}${n}${run[3]}`);
    }
  }
  return out;
}

/**
 * The most compact form: `compressPaths`, then `compressRuns`.
 *
 * @example
 * compactPaths(['A0.s0', 'A0.s1', 'A1.s2', 'A1.s3', 'A2.s4', 'A2.s5']) // [['A', 0, 2, '.s', 0, 2, 2, '']]
 */
export function compactPaths(paths: readonly string[]): PathEntry[] {
  return compressRuns(compressPaths(paths));
}

/**
 * `entries` followed by `paths`, compact: the same as `compactPaths` of the expanded entries and the paths,
 * without expanding the entries (a 20,000-step run's snapshot adds the steps since the last one to a few
 * entries, not to 20,000 paths). The paths must not repeat each other or the entries' paths.
 *
 * @example
 * appendPaths([['A.s', 0, 9, '']], ['A.s10', 'A.s11']) // [['A.s', 0, 11, '']]
 */
export function appendPaths(entries: readonly PathEntry[], paths: readonly string[]): PathEntry[] {
  const out = [...entries];
  for (const entry of compressPaths(paths)) {
    const last = out[out.length - 1];
    const joined = last === undefined || isGrid(last) ? null : joinRuns(last, entry);
    if (joined) out[out.length - 1] = joined;
    else out.push(entry);
  }
  return compressRuns(out);
}

/** `a` and `b` as one run, when `b`'s paths count on from `a`'s last by the same number; else null. */
function joinRuns(a: string | PathRun, b: string | PathRun): PathRun | null {
  const first = typeof b === 'string' ? b : `${b[0]}${b[1]}${b[3]}`;
  let run: PathRun;
  if (typeof a === 'string') {
    const split = stepBetween(a, first);
    if (!split) return null;
    run = [split[0], split[1], split[1], split[2]];
  } else {
    if (first !== `${a[0]}${a[2] + 1}${a[3]}`) return null;
    run = a;
  }
  const [prefix, from, to, suffix] = run;
  if (typeof b === 'string') return [prefix, from, to + 1, suffix];
  return b[0] === prefix && b[3] === suffix ? [prefix, from, b[2], suffix] : null;
}

/** True when `entry` is a grid of runs. */
export function isGrid(entry: PathEntry): entry is PathGrid {
  return typeof entry !== 'string' && entry.length === 8;
}

/** An entry as paths and runs: a grid's runs in order, else the entry itself. */
export function* runsOf(entry: PathEntry): Generator<string | PathRun> {
  if (!isGrid(entry)) {
    yield entry;
    return;
  }
  const [head, a0, a1, mid, from0, stride, len, suffix] = entry;
  for (let a = a0; a <= a1; a++) {
    const from = from0 + (a - a0) * stride;
    yield [`${head}${a}${mid}`, from, from + len - 1, suffix];
  }
}

/** How many paths `entry` names. */
function sizeOf(entry: PathEntry): number {
  if (typeof entry === 'string') return 1;
  if (isGrid(entry)) return (entry[2] - entry[1] + 1) * entry[6];
  return entry[2] - entry[1] + 1;
}

/**
 * `compressPaths`' entries with consecutive runs of one shape (the number in their prefix counting up, their
 * starts a fixed stride apart, their lengths and suffixes equal) kept as one grid: three runs or more, since
 * a grid of two is no shorter.
 *
 * @example
 * compressRuns([['A0.s', 0, 49, ''], ['A1.s', 50, 99, ''], ['A2.s', 100, 149, '']]) // [['A', 0, 2, '.s', 0, 50, 50, '']]
 */
export function compressRuns(entries: readonly PathEntry[]): PathEntry[] {
  const out: PathEntry[] = [];
  let i = 0;
  while (i < entries.length) {
    const first = entries[i];
    const previous = out[out.length - 1];
    if (previous !== undefined && isGrid(previous) && continues(previous, first)) {
      // A grid already made (an earlier snapshot's) goes on: a copy, since the entries may be a payload's.
      out[out.length - 1] = [previous[0], previous[1], previous[2] + 1, previous[3], previous[4], previous[5], previous[6], previous[7]];
      i += 1;
      continue;
    }
    const grid = typeof first !== 'string' && !isGrid(first) && i + 1 < entries.length ? gridStart(first, entries[i + 1]) : null;
    if (!grid) {
      out.push(first);
      i += 1;
      continue;
    }
    i += 2;
    while (i < entries.length && continues(grid, entries[i])) {
      grid[2] += 1;
      i += 1;
    }
    if (grid[2] - grid[1] >= 2) out.push(grid);
    else out.push(...runsOf(grid));
  }
  return out;
}

/** The grid two runs start, when the second's prefix is the first's with one number one higher and their lengths and suffixes match. */
function gridStart(a: PathRun, b: PathEntry): PathGrid | null {
  if (typeof b === 'string' || isGrid(b) || a[3] !== b[3] || a[2] - a[1] !== b[2] - b[1]) return null;
  const split = stepBetween(a[0], b[0]);
  if (!split) return null;
  const [head, n, mid] = split;
  return [head, n, n + 1, mid, a[1], b[1] - a[1], a[2] - a[1] + 1, a[3]];
}

/** True when `entry` is the run that comes after the grid's last. */
function continues(grid: PathGrid, entry: PathEntry): boolean {
  if (typeof entry === 'string' || isGrid(entry)) return false;
  const [head, a0, a1, mid, from0, stride, len, suffix] = grid;
  const from = from0 + (a1 + 1 - a0) * stride;
  return entry[0] === `${head}${a1 + 1}${mid}` && entry[1] === from && entry[2] === from + len - 1 && entry[3] === suffix && Number.isSafeInteger(a1 + 1);
}

/** When `b` is `a` with exactly one number one higher: `a` split around that number ([prefix, number, suffix]). */
function stepBetween(a: string, b: string): [string, number, string] | null {
  const pa = a.split(/(\d+)/);
  const pb = b.split(/(\d+)/);
  if (pa.length !== pb.length) return null;
  let at = -1;
  for (let k = 0; k < pa.length; k++) {
    if (pa[k] === pb[k]) continue;
    if (at >= 0 || k % 2 === 0) return null;
    at = k;
  }
  if (at < 0) return null;
  const n = Number(pa[at]);
  // Only canonical numbers (no leading zeros, safe integers) expand back to the same text.
  if (String(n) !== pa[at] || String(n + 1) !== pb[at] || !Number.isSafeInteger(n + 1)) return null;
  return [pa.slice(0, at).join(''), n, pa.slice(at + 1).join('')];
}

/**
 * A set of step paths held as `PathEntry`s, as a resume snapshot stores them: membership and size without
 * expanding the runs, so restoring a 20,000-step run from its snapshot does not build 20,000 strings. Paths
 * can be added and removed one at a time (the rows after the snapshot); iteration expands, in order (the
 * entries' paths, then the added ones). The entries name distinct paths, as `compressPaths` of a list
 * without repeats gives them.
 *
 * @example
 * const done = new PathSet([['A.s', 0, 19_999, '']]);
 * done.has('A.s12345'); // true, and done.size === 20_000
 */
export class PathSet implements ReadonlySet<string> {
  private readonly list: readonly PathEntry[];
  /** Runs by `${prefix}\0${suffix}`. */
  private readonly ranges = new Map<string, PathRun[]>();
  /** Grids by `${head}\0${mid}\0${suffix}`. */
  private readonly grids = new Map<string, PathGrid[]>();
  private readonly single = new Set<string>();
  private readonly added = new Set<string>();
  private readonly removed = new Set<string>();
  private count = 0;

  constructor(entries: readonly PathEntry[] = []) {
    this.list = entries;
    for (const entry of entries) {
      this.count += sizeOf(entry);
      if (typeof entry === 'string') {
        this.single.add(entry);
        continue;
      }
      if (isGrid(entry)) listIn(this.grids, `${entry[0]}\0${entry[3]}\0${entry[7]}`).push(entry);
      else listIn(this.ranges, `${entry[0]}\0${entry[3]}`).push(entry);
    }
  }

  get size(): number {
    return this.count;
  }

  has(path: string): boolean {
    if (this.added.has(path)) return true;
    if (this.removed.has(path)) return false;
    return this.inEntries(path);
  }

  /** Adds `path`; returns the set. */
  add(path: string): this {
    if (!this.has(path)) {
      if (this.inEntries(path)) this.removed.delete(path);
      else this.added.add(path);
      this.count += 1;
    }
    return this;
  }

  /** Removes `path`; true when it was in the set. */
  delete(path: string): boolean {
    if (!this.has(path)) return false;
    if (!this.added.delete(path)) this.removed.add(path);
    this.count -= 1;
    return true;
  }

  *[Symbol.iterator](): SetIterator<string> {
    const seen = new Set<string>();
    for (const path of [...expandPaths(this.list), ...this.added]) {
      if (seen.has(path) || this.removed.has(path)) continue;
      seen.add(path);
      yield path;
    }
  }

  keys(): SetIterator<string> {
    return this[Symbol.iterator]();
  }

  values(): SetIterator<string> {
    return this[Symbol.iterator]();
  }

  *entries(): SetIterator<[string, string]> {
    for (const path of this) yield [path, path];
  }

  forEach(fn: (value: string, key: string, set: ReadonlySet<string>) => void, thisArg?: unknown): void {
    for (const path of this) fn.call(thisArg, path, path, this);
  }

  /** The entries, when nothing was added or removed since (the set is exactly what they name, in order); else null. */
  compact(): readonly PathEntry[] | null {
    return this.added.size === 0 && this.removed.size === 0 ? this.list : null;
  }

  /** How many paths of the set start with `prefix` (a run whose prefix decides it is counted whole). */
  countStartingWith(prefix: string): number {
    const entries = this.compact();
    if (entries === null) return [...this].filter((path) => path.startsWith(prefix)).length;
    let n = 0;
    for (const entry of entries) {
      for (const run of runsOf(entry)) {
        if (typeof run === 'string') n += run.startsWith(prefix) ? 1 : 0;
        else if (run[0].startsWith(prefix)) n += run[2] - run[1] + 1;
        else if (prefix.startsWith(run[0])) n += expandPaths([run]).filter((path) => path.startsWith(prefix)).length;
      }
    }
    return n;
  }

  /** True when `path` is named by the entries (regardless of adds and removes). */
  private inEntries(path: string): boolean {
    if (this.single.has(path)) return true;
    if (this.ranges.size === 0 && this.grids.size === 0) return false;
    // Each number in the path may be the one a run counts (and each pair, a grid's two): try the text around them.
    const numbers: Array<[start: number, end: number]> = [];
    for (let at = 0; at < path.length;) {
      if (!isDigit(path.charCodeAt(at))) {
        at += 1;
        continue;
      }
      let end = at + 1;
      while (end < path.length && isDigit(path.charCodeAt(end))) end += 1;
      // Only canonical numbers (no leading zero, exact as a double) are counted by a run.
      if ((end - at === 1 || path.charCodeAt(at) !== 48) && end - at <= 15) {
        const n = Number(path.slice(at, end));
        if (this.ranges.size > 0 && this.ranges.get(`${path.slice(0, at)}\0${path.slice(end)}`)?.some(([, from, to]) => n >= from && n <= to)) return true;
        if (this.grids.size > 0) numbers.push([at, end]);
      }
      at = end;
    }
    for (let i = 0; i < numbers.length; i++) for (let j = i + 1; j < numbers.length; j++) if (this.inGrid(path, numbers[i], numbers[j])) return true;
    return false;
  }

  /** True when a grid names `path` with the number at `outer` as its prefix's and the one at `inner` as the run's. */
  private inGrid(path: string, outer: [number, number], inner: [number, number]): boolean {
    const key = `${path.slice(0, outer[0])}\0${path.slice(outer[1], inner[0])}\0${path.slice(inner[1])}`;
    const a = Number(path.slice(outer[0], outer[1]));
    const b = Number(path.slice(inner[0], inner[1]));
    return (
      this.grids.get(key)?.some(([, a0, a1, , from0, stride, len]) => {
        if (a < a0 || a > a1) return false;
        const from = from0 + (a - a0) * stride;
        return b >= from && b < from + len;
      }) ?? false
    );
  }
}

/** The list under `key`, made empty when absent. */
function listIn<T>(map: Map<string, T[]>, key: string): T[] {
  let list = map.get(key);
  if (!list) map.set(key, (list = []));
  return list;
}

function isDigit(code: number): boolean {
  return code >= 48 && code <= 57;
}
