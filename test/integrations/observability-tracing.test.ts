import 'reflect-metadata';
import { strict as assert } from 'node:assert';
import { describe, it } from 'node:test';
import { context, trace, SpanStatusCode } from '@opentelemetry/api';
import { composeTelemetry } from '../../src/integrations/compose-telemetry';
import { OpenTelemetryTelemetry } from '../../src/integrations/opentelemetry';
import { PrometheusTelemetry } from '../../src/integrations/prometheus';
import type { Telemetry } from '../../src/index';
import { AsyncLocalContextManager, InMemoryTracerProvider, type RecordedSpan } from './observability-tracer';
import { STEP_KEYS, pauseAndResume } from './observability-pipeline';

describe('OpenTelemetry traces (in-memory tracer provider on @opentelemetry/api)', () => {
  it('records a run span per call, a restore span on resume, a span per executed step and per side effect, all ended', async () => {
    const provider = new InMemoryTracerProvider();
    const { first, second } = await pauseAndResume({ telemetry: new OpenTelemetryTelemetry({ tracerProvider: provider }), failDraftOnce: true });
    assert.equal(first.status, 'paused');
    assert.equal(second.status, 'completed');

    const runs = provider.byName('waypoint.run');
    assert.equal(runs.length, 2);
    const [run1, run2] = runs as [RecordedSpan, RecordedSpan];
    assert.deepEqual(pick(run1, 'waypoint.run_id', 'waypoint.pipeline', 'waypoint.resumed', 'waypoint.steps_skipped', 'waypoint.status', 'waypoint.steps_executed'), [
      'observed-1',
      'observed',
      false,
      0,
      'paused',
      2,
    ]);
    assert.deepEqual(pick(run2, 'waypoint.resumed', 'waypoint.steps_skipped', 'waypoint.status', 'waypoint.steps_executed'), [true, 2, 'completed', 2]);
    assert.equal(run1.parentSpanId, undefined);

    const restore = provider.byName('waypoint.restore');
    assert.equal(restore.length, 1, 'only the resumed call restores');
    assert.equal(restore[0].parentSpanId, run2.spanId);
    assert.deepEqual(pick(restore[0], 'waypoint.restored', 'waypoint.steps_skipped'), [true, 2]);

    const steps = provider.byName('waypoint.step').filter((s) => s.attributes['waypoint.restored'] !== true);
    assert.deepEqual(
      steps.map((s) => s.attributes['waypoint.step']),
      STEP_KEYS,
    );
    assert.deepEqual(
      steps.map((s) => s.parentSpanId),
      [run1.spanId, run1.spanId, run2.spanId, run2.spanId],
    );
    assert.deepEqual(
      steps.map((s) => s.attributes['waypoint.restored']),
      [false, false, false, false],
    );
    assert.deepEqual(
      steps.map((s) => s.attributes['waypoint.sequence']),
      [1, 2, 3, 4],
    );
    assert.deepEqual(
      steps.map((s) => s.attributes['waypoint.attempt']),
      [1, 1, 2, 1],
      'the draft step succeeded on its 2nd attempt',
    );
    assert.ok(steps.every((s) => typeof s.attributes['waypoint.bytes'] === 'number' && s.attributes['waypoint.bytes'] > 0));
    assert.ok(steps.every((s) => s.attributes['waypoint.backend'] === 'memory'));
    assert.deepEqual(
      steps[2].events.map((e) => [e.name, e.attributes['waypoint.attempt'], e.attributes['waypoint.will_retry'], e.attributes['exception.message']]),
      [['waypoint.attempt_failed', 1, true, 'draft service busy']],
    );

    const effects = provider.byName('waypoint.side_effect');
    assert.equal(effects.length, 1);
    assert.equal(effects[0].parentSpanId, steps[3].spanId, 'the side effect nests under its step');
    assert.deepEqual(pick(effects[0], 'waypoint.operation', 'waypoint.outcome', 'waypoint.attempt', 'waypoint.step'), ['notify', 'executed', 1, 'Writer/send']);

    assert.ok(
      provider.spans.every((s) => s.endTime !== undefined && s.endTime >= s.startTime),
      'every span ended, after it started',
    );
    assert.ok(provider.spans.every((s) => s.traceId === (s.parentSpanId ? provider.spans.find((p) => p.spanId === s.parentSpanId)!.traceId : s.traceId)));
    assert.ok(steps[1].endTime! <= run1.endTime! && steps[3].endTime! <= run2.endTime!, 'steps end before their run');
  });

  it('records a span per restored step (waypoint.restored=true) on resume', async () => {
    const provider = new InMemoryTracerProvider();
    await pauseAndResume({ telemetry: new OpenTelemetryTelemetry({ tracerProvider: provider }) });
    const restored = provider.byName('waypoint.step').filter((s) => s.attributes['waypoint.restored'] === true);
    assert.deepEqual(
      restored.map((s) => s.attributes['waypoint.step']),
      STEP_KEYS.slice(0, 2),
    );
  });

  it('marks a failed run and its failing step with ERROR status', async () => {
    const provider = new InMemoryTracerProvider();
    await assert.rejects(
      pauseAndResume({
        telemetry: new OpenTelemetryTelemetry({ tracerProvider: provider }),
        hooks: {
          onDraft: () => {
            throw new Error('draft is down');
          },
        },
      }),
      { code: 'STEP_FAILED' },
    );
    const [, run2] = provider.byName('waypoint.run') as [RecordedSpan, RecordedSpan];
    assert.equal(run2.attributes['waypoint.status'], 'failed');
    assert.equal(run2.status.code, SpanStatusCode.ERROR);
    const draft = provider.byName('waypoint.step').find((s) => s.attributes['waypoint.step'] === 'Writer/draft')!;
    assert.equal(draft.status.code, SpanStatusCode.ERROR);
    assert.equal(draft.events.filter((e) => e.name === 'waypoint.attempt_failed').length, 3);
    assert.ok(provider.spans.every((s) => s.endTime !== undefined));
  });

  it('makes the step span the active span inside the step when a context manager is registered', async () => {
    const provider = new InMemoryTracerProvider();
    const manager = new AsyncLocalContextManager();
    assert.ok(context.setGlobalContextManager(manager));
    const seen: (string | undefined)[] = [];
    try {
      await pauseAndResume({
        telemetry: new OpenTelemetryTelemetry({ tracerProvider: provider }),
        hooks: { onDraft: () => void seen.push(trace.getActiveSpan()?.spanContext().spanId), inEffect: () => void seen.push(trace.getActiveSpan()?.spanContext().spanId) },
      });
    } finally {
      context.disable();
    }
    const draft = provider.byName('waypoint.step').find((s) => s.attributes['waypoint.step'] === 'Writer/draft')!;
    const effect = provider.byName('waypoint.side_effect')[0];
    assert.deepEqual(seen, [draft.spanId, effect.spanId]);
  });

  it('costs nothing visible without an SDK: the API hands out non-recording spans and the run is unchanged', async () => {
    const { second } = await pauseAndResume({ telemetry: new OpenTelemetryTelemetry() });
    assert.equal(second.status, 'completed');
    assert.equal(second.stepsExecuted, 2);
    assert.equal(trace.getTracerProvider().getTracer('waypoint').startSpan('probe').isRecording(), false);
  });

  it('composeTelemetry feeds every part and isolates one that throws (one warning per hook)', async () => {
    const provider = new InMemoryTracerProvider();
    const metrics = new PrometheusTelemetry();
    const broken: Telemetry = {
      runStarted: () => {
        throw new Error('broken runStarted');
      },
      stepCompleted: () => {
        throw new Error('broken stepCompleted');
      },
      stepFailed: () => undefined,
      sideEffect: () => undefined,
      runEnded: () => undefined,
      leaseLost: () => undefined,
      span: () => Promise.reject(new Error('broken span')),
    };
    const warnings: string[] = [];
    const onWarning = (warning: Error & { code?: string }) => void (warning.code === 'WAYPOINT_TELEMETRY' && warnings.push(warning.message));
    process.on('warning', onWarning);
    try {
      const { second } = await pauseAndResume({ telemetry: composeTelemetry(metrics, new OpenTelemetryTelemetry({ tracerProvider: provider }), broken) });
      assert.equal(second.status, 'completed');
      await new Promise((r) => setImmediate(r)); // warnings are emitted on the next tick
    } finally {
      process.off('warning', onWarning);
    }
    assert.equal(provider.byName('waypoint.step').filter((s) => s.attributes['waypoint.restored'] !== true).length, 4);
    const executed = (await metrics.registry.getSingleMetric('waypoint_steps_executed_total')!.get()).values[0].value;
    assert.equal(executed, 4);
    assert.equal(warnings.length, 3, warnings.join('\n'));
    assert.ok(warnings.some((w) => w.includes('runStarted')) && warnings.some((w) => w.includes('stepCompleted')) && warnings.some((w) => w.includes('span')));
  });

  it('composeTelemetry of nothing (or only no-ops) is the no-op telemetry', () => {
    assert.equal(composeTelemetry().constructor.name, 'NoopTelemetry');
    const one = new PrometheusTelemetry();
    assert.equal(composeTelemetry(one), one);
  });
});

function pick(span: RecordedSpan, ...keys: string[]): unknown[] {
  return keys.map((k) => span.attributes[k]);
}
