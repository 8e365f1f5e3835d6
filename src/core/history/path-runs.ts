/**
 * A compact form of a long, ordered list of step paths (a resume snapshot's `completed`): consecutive paths
 * that differ only in one number, counting up by one (`Big.s0`, `Big.s1`, ... or `loop[0]/Tick.tick`,
 * `loop[1]/Tick.tick`, ...), are kept as one run `[prefix, from, to, suffix]`, so a snapshot of a 20,000-step
 * straight line or a 20,000-iteration loop holds a few entries, not 20,000 paths. Order is kept exactly.
 */

/** Paths `${prefix}${i}${suffix}` for i from `from` to `to`, in that order. */
export type PathRun = [prefix: string, from: number, to: number, suffix: string];

/** Either one path or a run of them. */
export type PathEntry = string | PathRun;

/**
 * @example
 * compressPaths(['A.s0', 'A.s1', 'A.s2', 'B.x']) // [['A.s', 0, 2, ''], 'B.x']
 */
export function compressPaths(paths: readonly string[]): PathEntry[] {
  const out: PathEntry[] = [];
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
    if (typeof entry === 'string') out.push(entry);
    else for (let n = entry[1]; n <= entry[2]; n++) out.push(`${entry[0]}${n}${entry[3]}`);
  }
  return out;
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
  /** [from, to] ranges by `${prefix}\0${suffix}`. */
  private readonly ranges = new Map<string, Array<[number, number]>>();
  private readonly single = new Set<string>();
  private readonly added = new Set<string>();
  private readonly removed = new Set<string>();
  private count = 0;

  constructor(entries: readonly PathEntry[] = []) {
    this.list = entries;
    for (const entry of entries) {
      if (typeof entry === 'string') {
        this.single.add(entry);
        continue;
      }
      const key = `${entry[0]}\0${entry[3]}`;
      const list = this.ranges.get(key) ?? [];
      list.push([entry[1], entry[2]]);
      this.ranges.set(key, list);
    }
    this.count = entries.reduce<number>((sum, entry) => sum + (typeof entry === 'string' ? 1 : entry[2] - entry[1] + 1), 0);
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
      if (typeof entry === 'string') n += entry.startsWith(prefix) ? 1 : 0;
      else if (entry[0].startsWith(prefix)) n += entry[2] - entry[1] + 1;
      else if (prefix.startsWith(entry[0])) n += expandPaths([entry]).filter((path) => path.startsWith(prefix)).length;
    }
    return n;
  }

  /** True when `path` is named by the entries (regardless of adds and removes). */
  private inEntries(path: string): boolean {
    if (this.single.has(path)) return true;
    if (this.ranges.size === 0) return false;
    // Each number in the path may be the one a run counts: try the prefix and suffix around each.
    for (const match of path.matchAll(/\d+/g)) {
      const text = match[0];
      const n = Number(text);
      if (String(n) !== text) continue;
      const prefix = path.slice(0, match.index);
      const list = this.ranges.get(`${prefix}\0${path.slice(match.index + text.length)}`);
      if (list?.some(([from, to]) => n >= from && n <= to)) return true;
    }
    return false;
  }
}
