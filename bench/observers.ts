import { SpanStatusCode, trace } from '@opentelemetry/api';
import { Counter, Histogram, Registry } from 'prom-client';
import type { LogFields, Logger, StepEvent, Telemetry } from '../src/index';

/**
 * The observers the bench binds: a Telemetry that really records metrics (prom-client, as a user
 * would), one that also opens OpenTelemetry spans through the API alone (no SDK registered: the cost of
 * tracing "disabled"), and loggers that do nothing or format every record and drop it.
 */

/**
 * Telemetry with prom-client metrics in its own registry: steps, checkpoint latency and bytes, side
 * effects, runs, lease losses. `steps` is also read by the bench to check that the hooks fired.
 *
 * @example
 * const telemetry = new MetricsTelemetry();
 * container.bind(TOKENS.Telemetry).toConstantValue(telemetry);
 */
export class MetricsTelemetry implements Telemetry {
  readonly registry = new Registry();
  steps = 0;
  private readonly completed = new Counter({ name: 'waypoint_steps_completed_total', help: 'steps', labelNames: ['backend'], registers: [this.registry] });
  private readonly failed = new Counter({ name: 'waypoint_steps_failed_total', help: 'failed attempts', labelNames: ['backend'], registers: [this.registry] });
  private readonly checkpointMs = new Histogram({
    name: 'waypoint_checkpoint_write_ms',
    help: 'checkpoint write latency',
    labelNames: ['backend'],
    buckets: [0.25, 0.5, 1, 2, 5, 10, 25, 50, 100],
    registers: [this.registry],
  });
  private readonly bytes = new Histogram({ name: 'waypoint_checkpoint_bytes', help: 'payload bytes', buckets: [256, 1024, 4096, 16384, 65536], registers: [this.registry] });
  private readonly effects = new Counter({ name: 'waypoint_side_effects_total', help: 'side effects', labelNames: ['outcome'], registers: [this.registry] });
  private readonly runs = new Counter({ name: 'waypoint_runs_total', help: 'runs by end status', labelNames: ['status'], registers: [this.registry] });
  private readonly resumed = new Counter({ name: 'waypoint_steps_skipped_total', help: 'steps restored', registers: [this.registry] });
  private readonly leases = new Counter({ name: 'waypoint_lease_lost_total', help: 'lease losses', registers: [this.registry] });

  runStarted(event: { skipped: number }): void {
    this.resumed.inc(event.skipped);
  }
  stepCompleted(event: StepEvent & { checkpointMs: number; bytes: number }): void {
    this.steps += 1;
    this.completed.inc({ backend: event.backend });
    this.checkpointMs.observe({ backend: event.backend }, event.checkpointMs);
    this.bytes.observe(event.bytes);
  }
  stepFailed(event: StepEvent): void {
    this.failed.inc({ backend: event.backend });
  }
  sideEffect(event: { outcome: string }): void {
    this.effects.inc({ outcome: event.outcome });
  }
  runEnded(event: { status: string }): void {
    this.runs.inc({ status: event.status });
  }
  leaseLost(): void {
    this.leases.inc();
  }
  span<T>(_name: string, _attributes: Record<string, string | number | boolean>, fn: () => Promise<T>): Promise<T> {
    return fn();
  }
}

/** MetricsTelemetry plus a span per step and side effect through `@opentelemetry/api`. */
export class TracingTelemetry extends MetricsTelemetry {
  private readonly tracer = trace.getTracer('waypoint-bench');

  override span<T>(name: string, attributes: Record<string, string | number | boolean>, fn: () => Promise<T>): Promise<T> {
    return this.tracer.startActiveSpan(name, { attributes }, async (span) => {
      try {
        return await fn();
      } catch (error) {
        span.setStatus({ code: SpanStatusCode.ERROR });
        throw error;
      } finally {
        span.end();
      }
    });
  }
}

/** Logging disabled: every call returns at once. */
export class SilentLogger implements Logger {
  debug(): void {}
  info(): void {}
  warn(): void {}
  error(): void {}
}

/**
 * Logging enabled at debug, minus the terminal: every record is formatted as a JSON line (what a
 * structured logger does) and dropped, so the figure is the runtime's cost, not the terminal's.
 */
export class FormattingLogger implements Logger {
  lines = 0;
  debug(message: string, fields?: LogFields): void {
    this.format('debug', message, fields);
  }
  info(message: string, fields?: LogFields): void {
    this.format('info', message, fields);
  }
  warn(message: string, fields?: LogFields): void {
    this.format('warn', message, fields);
  }
  error(message: string, fields?: LogFields): void {
    this.format('error', message, fields);
  }
  private format(level: string, message: string, fields?: LogFields): void {
    if (JSON.stringify({ time: new Date().toISOString(), level, msg: message, ...fields }).length > 0) this.lines += 1;
  }
}
