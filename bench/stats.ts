/**
 * Small statistics for repeated measurements: every figure the bench prints is a median of several
 * repetitions with the spread (min..max) beside it, because the machine is shared and noisy.
 */

/** A set of repeated measurements of one quantity. */
export interface Summary {
  median: number;
  min: number;
  max: number;
  /** The raw samples, in measurement order. */
  samples: number[];
}

/**
 * @example
 * summarize([3, 1, 2]) // { median: 2, min: 1, max: 3, samples: [3, 1, 2] }
 */
export function summarize(samples: readonly number[]): Summary {
  if (samples.length === 0) throw new Error('summarize: no samples');
  const sorted = [...samples].sort((a, b) => a - b);
  const mid = sorted.length >> 1;
  const median = sorted.length % 2 === 1 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2;
  return { median, min: sorted[0], max: sorted[sorted.length - 1], samples: [...samples] };
}

/**
 * Ratios of paired samples (measured[i] / floor[i], taken in the same round, so both saw the same
 * noise), summarized. The median of paired ratios is more robust than the ratio of medians when the
 * machine's load changes between rounds.
 */
export function pairedRatio(measured: readonly number[], floor: readonly number[]): Summary {
  if (measured.length !== floor.length) throw new Error('pairedRatio: sample counts differ');
  return summarize(measured.map((m, i) => m / floor[i]));
}

/** Least-squares slope of y over x (units of y per unit of x): `slope([0, 1, 2], [5, 7, 9])` → 2. */
export function slope(xs: readonly number[], ys: readonly number[]): number {
  const n = xs.length;
  if (n < 2) return 0;
  const mx = xs.reduce((a, b) => a + b, 0) / n;
  const my = ys.reduce((a, b) => a + b, 0) / n;
  let num = 0;
  let den = 0;
  for (let i = 0; i < n; i++) {
    num += (xs[i] - mx) * (ys[i] - my);
    den += (xs[i] - mx) ** 2;
  }
  return den === 0 ? 0 : num / den;
}

/** Target check of a ratio: whether it is met and, if not, by how much it is missed. */
export interface Verdict {
  target: number;
  met: boolean;
  /** (ratio / target - 1), > 0 when missed. */
  missedBy: number;
}

/** A "within `target`x" target, met when ratio <= target: `within(1.3, 1.25)` → missed by 4%. */
export function within(ratio: number, target: number): Verdict {
  return { target, met: ratio <= target, missedBy: ratio / target - 1 };
}

/** An "at least `target`x" target (throughput), met when ratio >= target: `atLeast(0.5, 1)` → missed by 100%. */
export function atLeast(ratio: number, target: number): Verdict {
  return { target, met: ratio >= target, missedBy: target / ratio - 1 };
}
