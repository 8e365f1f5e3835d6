import { context, trace, SpanStatusCode, type Context, type Span, type Tracer, type TracerProvider } from '@opentelemetry/api';
import type { StepEvent, Telemetry } from '../contract/telemetry';

type Attributes = Record<string, string | number | boolean>;

/** Options of {@link OpenTelemetryTelemetry}. */
export interface OpenTelemetryOptions {
  /** Tracer to use. Default: `tracerProvider.getTracer('waypoint')`. */
  tracer?: Tracer;
  /** Provider to get the tracer from. Default: the global one (`trace.getTracerProvider()`). */
  tracerProvider?: TracerProvider;
  /** Runs with open spans kept at most (a run whose end is never reported is dropped past it). Default 10 000. */
  maxOpenRuns?: number;
}

/** Open spans of one run in this process. One executor runs one step (and one side effect) at a time. */
interface RunSpans {
  run: Span;
  ctx: Context;
  step?: { span: Span; key: string; ctx: Context };
  effect?: { span: Span; operation: string };
}

/**
 * OpenTelemetry traces through `@opentelemetry/api` only: without a registered SDK every span is the
 * API's non-recording no-op, so tracing costs next to nothing until an application installs one.
 *
 * Spans: `waypoint.run` per run / resume call (attributes `waypoint.run_id`, `waypoint.pipeline`,
 * `waypoint.resumed`, `waypoint.steps_skipped`, at the end `waypoint.status`, `waypoint.steps_executed`;
 * ERROR status when the run failed); under it `waypoint.restore` for a resumed run (the load and restore
 * of its `waypoint.steps_skipped` checkpointed steps, `waypoint.restored=true`); `waypoint.step` per
 * executed step (`waypoint.step`, `waypoint.restored=false`, and once its checkpoint is durable
 * `waypoint.attempt`, `waypoint.sequence`, `waypoint.bytes`, `waypoint.checkpoint_ms`,
 * `waypoint.backend`; a `waypoint.attempt_failed` event per failed attempt); and `waypoint.side_effect`
 * per side effect under its step (`waypoint.operation`, `waypoint.attempt`, `waypoint.outcome`: executed,
 * failed, or, as a zero-length span, reused / reconciled). A step span lasts until its checkpoint is
 * written, so its duration includes the write.
 *
 * @example
 * const waypoint = await Waypoint.create({ modules: [telemetryModule(new OpenTelemetryTelemetry())] });
 */
export class OpenTelemetryTelemetry implements Telemetry {
  private readonly tracer: Tracer;
  private readonly runs = new Map<string, RunSpans>();
  private readonly maxOpenRuns: number;

  constructor(options: OpenTelemetryOptions = {}) {
    this.tracer = options.tracer ?? (options.tracerProvider ?? trace.getTracerProvider()).getTracer('waypoint');
    this.maxOpenRuns = options.maxOpenRuns ?? 10_000;
  }

  runStarted(event: Parameters<Telemetry['runStarted']>[0]): void {
    this.close(event.runId, 'superseded by a new run call');
    if (this.runs.size >= this.maxOpenRuns) this.close(this.runs.keys().next().value!, 'dropped: too many open runs');
    const now = Date.now();
    const startTime = now - event.restoreMs;
    const run = this.tracer.startSpan(
      'waypoint.run',
      {
        startTime,
        attributes: { 'waypoint.run_id': event.runId, 'waypoint.pipeline': event.pipeline, 'waypoint.resumed': event.resumed, 'waypoint.steps_skipped': event.skipped },
      },
      context.active(),
    );
    const ctx = trace.setSpan(context.active(), run);
    this.runs.set(event.runId, { run, ctx });
    if (event.resumed) {
      this.tracer
        .startSpan('waypoint.restore', { startTime, attributes: { 'waypoint.run_id': event.runId, 'waypoint.restored': true, 'waypoint.steps_skipped': event.skipped } }, ctx)
        .end(now);
      // One zero-length span per restored step, so a trace shows every step of the run, run or reused.
      for (const restored of event.restoredSteps ?? []) {
        this.tracer
          .startSpan(
            'waypoint.step',
            { startTime: now, attributes: { 'waypoint.run_id': event.runId, 'waypoint.step': restored.step, 'waypoint.sequence': restored.sequence, 'waypoint.restored': true } },
            ctx,
          )
          .end(now);
      }
    }
  }

  stepCompleted(event: StepEvent & { attempt: number; durationMs: number; checkpointMs: number; bytes: number }): void {
    const spans = this.runs.get(event.runId);
    const step = spans?.step;
    if (!spans || !step || step.key !== event.step) return;
    step.span.setAttributes({
      'waypoint.attempt': event.attempt,
      'waypoint.sequence': event.sequence,
      'waypoint.bytes': event.bytes,
      'waypoint.checkpoint_ms': event.checkpointMs,
      'waypoint.backend': event.backend,
    });
    this.endEffect(spans);
    step.span.end();
    spans.step = undefined;
  }

  stepFailed(event: StepEvent & { attempt: number; error: unknown; willRetry: boolean }): void {
    const step = this.runs.get(event.runId)?.step;
    if (!step || step.key !== event.step) return;
    step.span.addEvent('waypoint.attempt_failed', {
      'waypoint.attempt': event.attempt,
      'waypoint.will_retry': event.willRetry,
      'exception.message': event.error instanceof Error ? event.error.message : String(event.error),
    });
  }

  sideEffect(event: { runId: string; step: string; operation: string; outcome: 'executed' | 'reused' | 'reconciled' | 'failed' }): void {
    const spans = this.runs.get(event.runId);
    if (!spans) return;
    const effect = spans.effect;
    if (effect && effect.operation === event.operation) {
      effect.span.setAttribute('waypoint.outcome', event.outcome);
      this.endEffect(spans);
      return;
    }
    if (event.outcome === 'reused' || event.outcome === 'reconciled') {
      // The runtime opens no span for an effect answered from the log: record it as a zero-length one.
      this.tracer
        .startSpan(
          'waypoint.side_effect',
          { attributes: { 'waypoint.run_id': event.runId, 'waypoint.step': event.step, 'waypoint.operation': event.operation, 'waypoint.outcome': event.outcome } },
          spans.step?.ctx ?? spans.ctx,
        )
        .end();
    }
  }

  runEnded(event: { runId: string; pipeline: string; status: string; stepsExecuted: number }): void {
    const spans = this.runs.get(event.runId);
    if (!spans) return;
    spans.run.setAttributes({ 'waypoint.status': event.status, 'waypoint.steps_executed': event.stepsExecuted });
    if (event.status === 'failed') spans.run.setStatus({ code: SpanStatusCode.ERROR, message: `run ${event.runId} failed` });
    this.close(event.runId);
  }

  leaseLost(event: { runId: string; epoch: number }): void {
    this.runs.get(event.runId)?.run.addEvent('waypoint.lease_lost', { 'waypoint.epoch': event.epoch });
  }

  span<T>(name: string, attributes: Attributes, fn: () => Promise<T>): Promise<T> {
    const runId = typeof attributes['waypoint.run_id'] === 'string' ? attributes['waypoint.run_id'] : undefined;
    const spans = runId === undefined ? undefined : this.runs.get(runId);
    if (name === 'waypoint.step' && spans) return this.stepSpan(spans, attributes, fn);
    if (name === 'waypoint.side_effect' && spans) return this.effectSpan(spans, attributes, fn);
    const parent = spans?.step?.ctx ?? spans?.ctx ?? context.active();
    const span = this.tracer.startSpan(name, { attributes }, parent);
    return within(trace.setSpan(parent, span), fn).then(
      (value) => {
        span.end();
        return value;
      },
      (error: unknown) => {
        failed(span, error);
        span.end();
        throw error;
      },
    );
  }

  /** A step span stays open after the step returns, until `stepCompleted` (checkpoint durable) or a failure. */
  private stepSpan<T>(spans: RunSpans, attributes: Attributes, fn: () => Promise<T>): Promise<T> {
    this.endStep(spans);
    const span = this.tracer.startSpan('waypoint.step', { attributes }, spans.ctx);
    const ctx = trace.setSpan(spans.ctx, span);
    const step = { span, key: String(attributes['waypoint.step'] ?? ''), ctx };
    spans.step = step;
    return within(ctx, fn).catch((error: unknown) => {
      failed(span, error);
      span.end();
      if (spans.step === step) spans.step = undefined;
      throw error;
    });
  }

  /** A side-effect span stays open after the call returns, until its outcome is recorded (`sideEffect`). */
  private effectSpan<T>(spans: RunSpans, attributes: Attributes, fn: () => Promise<T>): Promise<T> {
    this.endEffect(spans);
    const parent = spans.step?.ctx ?? spans.ctx;
    const span = this.tracer.startSpan('waypoint.side_effect', { attributes: { ...attributes, 'waypoint.step': spans.step?.key ?? '' } }, parent);
    const effect = { span, operation: String(attributes['waypoint.operation'] ?? '') };
    spans.effect = effect;
    return within(trace.setSpan(parent, span), fn).catch((error: unknown) => {
      span.setAttribute('waypoint.outcome', 'failed');
      failed(span, error);
      span.end();
      if (spans.effect === effect) spans.effect = undefined;
      throw error;
    });
  }

  private endEffect(spans: RunSpans): void {
    spans.effect?.span.end();
    spans.effect = undefined;
  }

  private endStep(spans: RunSpans, why?: string): void {
    this.endEffect(spans);
    if (!spans.step) return;
    // Reached only when the checkpoint was never reported (the write failed or the run stopped).
    spans.step.span.setAttribute('waypoint.checkpointed', false);
    if (why) spans.step.span.addEvent(why);
    spans.step.span.end();
    spans.step = undefined;
  }

  private close(runId: string, why?: string): void {
    const spans = this.runs.get(runId);
    if (!spans) return;
    this.endStep(spans, why);
    if (why) spans.run.addEvent(why);
    spans.run.end();
    this.runs.delete(runId);
  }
}

function failed(span: Span, error: unknown): void {
  span.recordException(error instanceof Error ? error : { message: String(error) });
  span.setStatus({ code: SpanStatusCode.ERROR, message: error instanceof Error ? error.message : String(error) });
}

/** `fn` in `ctx` (so spans an application opens inside a step nest under it), a synchronous throw as a rejection. */
function within<T>(ctx: Context, fn: () => Promise<T>): Promise<T> {
  try {
    return context.with(ctx, fn);
  } catch (error) {
    return Promise.reject(error);
  }
}
