import type { Backend, BenchEnvironment, WaypointSetup } from './environment';
import { benchPipeline, type StepHooks } from './pipeline';
import { ratioSpread, us, usSpread, type Section } from './report';
import { pairedRatio, summarize, type Summary } from './stats';
import { interleave, timedRun } from './timed-run';

/**
 * Per-step cost of the same pipeline under several configurations of the runtime (integrity modes,
 * observers), each its own Waypoint on the same backend, measured in interleaved rounds and compared
 * with the first (baseline) variant round by round.
 */

export interface Variant {
  label: string;
  setup: WaypointSetup;
}

/** A variant's per-step cost and its per-round ratio to the baseline. */
export interface VariantResult {
  label: string;
  perStepUs: Summary;
  /** Per-round ratio to the baseline variant. */
  vsBaseline: Summary;
}

/**
 * @example
 * const r = await measureVariants(env, 'memory', [{ label: 'plain', setup: {} }, { label: 'hmac', setup: { options: { hmacKey: key } } }], 7, 2000, 'integ');
 */
export async function measureVariants(
  env: BenchEnvironment,
  backend: Backend,
  variants: readonly Variant[],
  rounds: number,
  steps: number,
  name: string,
): Promise<VariantResult[]> {
  const measures: Record<string, () => Promise<number>> = {};
  for (const [i, variant] of variants.entries()) {
    const bw = await env.waypoint(backend, { ...variant.setup, name: `${name}${i}` });
    const hooks: StepHooks = {};
    const pipeline = benchPipeline({ name: `${name}_${backend}_${i}`, steps, payloadBytes: 1000, state: 'flat', hooks });
    measures[variant.label] = async () => (await timedRun(bw, pipeline, hooks, steps)).perStepUs;
  }
  const samples = await interleave(rounds, measures);
  const base = samples[variants[0].label];
  return variants.map((v) => ({ label: v.label, perStepUs: summarize(samples[v.label]), vsBaseline: pairedRatio(samples[v.label], base) }));
}

/** Adds one row per variant: backend, label, µs/step, extra µs over the baseline, ratio, and a verdict column. */
export function addVariantRows(out: Section, backend: Backend, results: readonly VariantResult[], judge: (r: VariantResult, i: number) => string): void {
  const base = results[0].perStepUs.median;
  results.forEach((r, i) => {
    out.rows.push([
      i === 0 ? backend : '',
      r.label,
      usSpread(r.perStepUs),
      i === 0 ? '—' : `${r.perStepUs.median - base >= 0 ? '+' : ''}${us(r.perStepUs.median - base)}`,
      i === 0 ? '1.00x' : ratioSpread(r.vsBaseline),
      judge(r, i),
    ]);
  });
  out.figures[backend] = results;
}

/**
 * Whether a variant costs measurably more than the baseline: it does when it was slower in every round
 * (all paired ratios above 1), a sign test that holds up on a noisy shared machine.
 */
export function measurable(r: VariantResult): boolean {
  return r.vsBaseline.min > 1;
}
