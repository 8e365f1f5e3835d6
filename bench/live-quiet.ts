import { pairedRatio, summarize } from './stats';
import type { Backend, BenchEnvironment } from './environment';
import { BENCH_INPUT, benchPipeline, type StepHooks } from './pipeline';
import { ratioSpread, section, usSpread, type Section } from './report';

/*
 * Live output (issue 37): a step that emits nothing costs what it cost before streams. The same pipeline
 * of steps that never call ctx.emit, run on a store that keeps streams and on the same store with its
 * stream methods hidden (BenchEnvironment `hideStreams`: the runtime then writes no stream at all),
 * alternating rounds; per-step time of each run, and the median of the paired ratios.
 */

const BACKENDS: Backend[] = ['sqlite', 'postgres', 'memory'];

/**
 * The quiet-step figure (group `live-quiet`).
 *
 * @example
 * const s = await quietStepFigure(env, { quick: false }, progress);
 */
export async function quietStepFigure(env: BenchEnvironment, options: { quick: boolean }, progress: (line: string) => void): Promise<Section> {
  const steps = options.quick ? 50 : 200;
  const rounds = options.quick ? 3 : 7;
  const out = section(
    'live-output-quiet-steps',
    'Live output: a step that emits nothing',
    `a run of ${steps} steps that never emit (1 KB state value each), per-step time of the whole run; streams available vs. the same store with its stream methods hidden (no stream written at all); ${rounds} alternating rounds, median of the paired ratios (min–max)`,
    ['backend', 'streams: per step', 'hidden: per step', 'streams / hidden'],
  );
  for (const backend of BACKENDS) {
    progress(`live output, quiet steps: ${backend}`);
    const withStreams = await env.waypoint(backend, { name: 'quiet' });
    const hidden = await env.waypoint(backend, { name: 'quiet_hidden', hideStreams: true });
    const hooks: StepHooks = {};
    const pipeline = benchPipeline({ name: `quiet_${backend}`, steps, payloadBytes: 1000, state: 'flat', hooks });
    const timed = async (bw: typeof hidden, runId: string) => {
      const started = performance.now();
      await bw.waypoint.run(pipeline, { runId, input: BENCH_INPUT });
      const perStep = ((performance.now() - started) * 1000) / steps;
      await bw.forget(runId);
      return perStep;
    };
    await timed(withStreams, 'warm');
    await timed(hidden, 'warm');
    const on: number[] = [];
    const off: number[] = [];
    for (let round = 0; round < rounds; round++) {
      // Alternating which goes first, so a drift of the machine weighs on both.
      const first = round % 2 === 0 ? 'on' : 'off';
      for (const which of first === 'on' ? ['on', 'off'] : ['off', 'on']) {
        if (which === 'on') on.push(await timed(withStreams, `q${round}`));
        else off.push(await timed(hidden, `q${round}`));
      }
    }
    const paired = pairedRatio(on, off);
    out.rows.push([backend, usSpread(summarize(on)), usSpread(summarize(off)), ratioSpread(paired)]);
    out.figures[backend] = { streamsPerStepUs: on, hiddenPerStepUs: off, ratio: paired.median };
  }
  out.notes.push(
    'A step that emits nothing creates no writer and appends nothing: the run has one writer per execution, which appends a running status when the execution starts and the final status when it ends (two events per run, not per step); a step row waits for stream events only when its attempt emitted some.',
  );
  const verdicts = BACKENDS.map((backend) => {
    const ratios = (out.figures[backend] as { streamsPerStepUs: number[]; hiddenPerStepUs: number[] } | undefined) ?? null;
    if (!ratios) return `${backend}: not measured`;
    const paired = pairedRatio(ratios.streamsPerStepUs, ratios.hiddenPerStepUs);
    return `${backend}: ${paired.min <= 1 && paired.max >= 1 ? 'met' : 'MISSED'}`;
  });
  out.notes.push(`Target (issue 37): within noise, i.e. the paired ratios' min–max spread contains 1.00x. ${verdicts.join('; ')}.`);
  return out;
}
