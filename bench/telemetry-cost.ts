import { NoopTelemetry } from '../src/index';
import type { BenchEnvironment } from './environment';
import { FormattingLogger, MetricsTelemetry, SilentLogger, TracingTelemetry } from './observers';
import { section, type Section } from './report';
import { addVariantRows, measurable, measureVariants, type Variant } from './variants';

/**
 * Figure 8 (issue 7: "no measurable cost when disabled"): per-step cost on the memory store, where any
 * runtime overhead shows, with logging and telemetry off, as Waypoint.create binds them by default,
 * with prom-client metrics, with OpenTelemetry spans through the API alone (no SDK: tracing disabled),
 * and with every log record formatted (logging enabled at debug, output dropped).
 */
export async function telemetryFigure(env: BenchEnvironment, options: { quick: boolean }, progress: (line: string) => void): Promise<Section> {
  const rounds = options.quick ? 3 : 9;
  const steps = options.quick ? 300 : 2000;
  const out = section(
    'telemetry',
    'Logging and telemetry: per-step cost, memory store',
    `1 KB flat step, ${steps} steps; median of ${rounds} interleaved rounds (min–max); ratio = per-round variant / all off; "measurable" = slower in every round`,
    ['backend', 'variant', 'per step', 'extra', 'ratio to off', 'verdict'],
  );
  const variants: Variant[] = [
    { label: 'all off (silent logger, no-op telemetry)', setup: { logger: new SilentLogger(), telemetry: new NoopTelemetry() } },
    { label: 'defaults (JsonLogger at warn, no-op telemetry)', setup: { telemetry: new NoopTelemetry() } },
    { label: 'prom-client metrics', setup: { logger: new SilentLogger(), telemetry: new MetricsTelemetry() } },
    { label: 'metrics + OTel API spans, no SDK', setup: { logger: new SilentLogger(), telemetry: new TracingTelemetry() } },
    { label: 'metrics + debug logs formatted', setup: { logger: new FormattingLogger(), telemetry: new MetricsTelemetry() } },
  ];
  progress('telemetry: memory');
  const results = await measureVariants(env, 'memory', variants, rounds, steps, 'telem');
  addVariantRows(out, 'memory', results, (r, i) => (i === 0 ? '' : measurable(r) ? 'measurable' : 'within noise'));
  const defaults = results[1];
  out.notes.push(
    `Target (issue 7): disabled logging/tracing costs nothing measurable — defaults vs all off: ${measurable(defaults) ? `MISSED, +${((defaults.vsBaseline.median - 1) * 100).toFixed(1)}% per step` : 'met (within noise)'}.`,
  );
  return out;
}
