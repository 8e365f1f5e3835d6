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
