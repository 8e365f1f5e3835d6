import 'reflect-metadata';
import { strict as assert } from 'node:assert';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { ContainerModule } from 'inversify';
import { Registry } from 'prom-client';
import { DEMO_INPUT, FinancialAnalysis, exampleModule, stepKeys } from '../../examples/financial-analysis/pipeline';
import { TOKENS, Waypoint, type Logger } from '../../src/index';
import { telemetryModule } from '../../src/integrations/compose-telemetry';
import { PrometheusTelemetry, metricsHandler, serveMetrics } from '../../src/integrations/prometheus';
import { TypeOrmCheckpointStore } from '../../src/storage/sql/typeorm-store';
import { killLiveChildren } from '../helpers/child-process';
import { crashWorker } from '../cli/cli-harness';
import { ObservedPipeline, observedWaypoint, pauseAndResume } from './observability-pipeline';

const SILENT: Logger = { debug: () => undefined, info: () => undefined, warn: () => undefined, error: () => undefined };

/** The value of one sample (`name` as exposed, e.g. `..._count` of a histogram) whose labels include `labels`. */
async function sample(registry: Registry, name: string, labels: Record<string, string> = {}): Promise<number> {
  for (const metric of await registry.getMetricsAsJSON()) {
    for (const value of metric.values) {
      const sampleName = (value as { metricName?: string }).metricName ?? metric.name;
      if (sampleName !== name) continue;
      if (Object.entries(labels).every(([k, v]) => String((value.labels as Record<string, unknown>)[k]) === v)) return value.value;
    }
  }
  throw new Error(`no sample ${name} ${JSON.stringify(labels)} in:\n${await registry.metrics()}`);
}

/**
 * A real crash and resume: a child process runs the financial-analysis example and is killed with
 * SIGKILL at a fault point; this process resumes the run with PrometheusTelemetry bound, and the
 * registry must account for every step: restored ones as skipped, the rest as executed.
 */
describe('Prometheus metrics after a crash and a resume', { timeout: 60_000 }, () => {
  const dir = mkdtempSync(join(tmpdir(), 'waypoint-metrics-'));
  after(async () => {
    await killLiveChildren();
    rmSync(dir, { recursive: true, force: true });
  });

  async function resumeWithMetrics(runId: string, fault: string) {
    const path = join(dir, `${runId}.db`);
    const outbox = join(dir, `${runId}-outbox.jsonl`);
    await crashWorker(runId, fault, { WAYPOINT_DB: path, WAYPOINT_PG_URL: undefined, WAYPOINT_OUTBOX: outbox });
    const store = new TypeOrmCheckpointStore({ type: 'sqlite', path });
    const telemetry = new PrometheusTelemetry({ runsByStatus: { store, minIntervalMs: 0 } });
    const waypoint = await Waypoint.create({
      modules: [
        new ContainerModule(({ bind }) => {
          bind(TOKENS.CheckpointStore).toConstantValue(store);
          bind(TOKENS.Logger).toConstantValue(SILENT);
        }),
        exampleModule({ llm: { delayMs: 0 }, outboxPath: outbox }),
        telemetryModule(telemetry),
      ],
    });
    const result = await waypoint.run(FinancialAnalysis, { runId, input: { ...DEMO_INPUT } });
    return { result, registry: telemetry.registry, waypoint };
  }

  it('crashed after its 4th checkpoint: 4 steps skipped, the rest executed, one checkpoint write and payload observed per executed step', async () => {
    const total = stepKeys().length;
    const { result, registry, waypoint } = await resumeWithMetrics('crash-4', 'after-checkpoint-before-next-step@4');
    try {
      assert.equal(result.status, 'completed');
      const pipeline = { pipeline: 'financial-analysis' };
      const skipped = await sample(registry, 'waypoint_steps_skipped_total', pipeline);
      const executed = await sample(registry, 'waypoint_steps_executed_total', pipeline);
      assert.equal(skipped, 4, 'steps done before the crash');
      assert.equal(executed, total - 4, 'the rest');
      assert.equal(skipped + executed, total);
      assert.deepEqual([skipped, executed], [result.stepsSkipped, result.stepsExecuted]);

      assert.equal(await sample(registry, 'waypoint_checkpoint_write_duration_seconds_count', { backend: 'sqlite' }), executed);
      assert.ok((await sample(registry, 'waypoint_checkpoint_write_duration_seconds_sum', { backend: 'sqlite' })) > 0);
      assert.equal(await sample(registry, 'waypoint_checkpoint_payload_bytes_count', { backend: 'sqlite' }), executed);
      const rows = (await waypoint.store.listSteps('crash-4')).slice(4);
      const bytes = rows.reduce((sum, row) => sum + row.output.length + (row.memory?.length ?? 0), 0);
      assert.equal(await sample(registry, 'waypoint_checkpoint_payload_bytes_sum', { backend: 'sqlite' }), bytes, 'payload bytes are what was stored');
      assert.equal(await sample(registry, 'waypoint_step_duration_seconds_count', pipeline), executed);

      assert.equal(await sample(registry, 'waypoint_runs_started_total', { ...pipeline, resumed: 'true' }), 1);
      assert.equal(await sample(registry, 'waypoint_runs_ended_total', { ...pipeline, status: 'completed' }), 1);
      assert.equal(await sample(registry, 'waypoint_resume_duration_seconds_count', pipeline), 1);
      assert.equal(await sample(registry, 'waypoint_side_effects_total', { outcome: 'executed' }), 1);
      assert.equal(await sample(registry, 'waypoint_side_effects_total', { outcome: 'reused' }), 0);
      assert.equal(await sample(registry, 'waypoint_lease_losses_total'), 0);
      assert.equal(await sample(registry, 'waypoint_runs', { status: 'completed' }), 1);
      assert.equal(await sample(registry, 'waypoint_runs', { status: 'running' }), 0);

      const server = await serveMetrics({ registry, port: 0, host: '127.0.0.1' });
      try {
        const scraped = await fetch(server.url);
        assert.equal(scraped.status, 200);
        assert.match(scraped.headers.get('content-type') ?? '', /^text\/plain/);
        const text = await scraped.text();
        assert.match(text, new RegExp(`^waypoint_steps_executed_total\\{pipeline="financial-analysis"\\} ${executed}$`, 'm'));
        assert.match(text, /^waypoint_steps_skipped_total\{pipeline="financial-analysis"\} 4$/m);
        assert.match(text, /^waypoint_checkpoint_write_duration_seconds_bucket\{le="\+Inf",backend="sqlite"\} 7$/m);
        assert.equal((await fetch(server.url.replace('/metrics', '/other'))).status, 404);
        assert.equal((await fetch(server.url, { method: 'POST' })).status, 405);
      } finally {
        await server.close();
      }
    } finally {
      await waypoint.close();
    }
  });

  it('crashed after the report was sent and recorded, before its checkpoint: the resumed step reuses the recorded send', async () => {
    const total = stepKeys().length;
    const { result, registry, waypoint } = await resumeWithMetrics('crash-send', `after-record-before-checkpoint@${total}`);
    try {
      assert.equal(result.stepsExecuted, 1);
      assert.equal(await sample(registry, 'waypoint_steps_skipped_total', { pipeline: 'financial-analysis' }), total - 1);
      assert.equal(await sample(registry, 'waypoint_side_effects_total', { outcome: 'reused' }), 1);
      assert.equal(await sample(registry, 'waypoint_side_effects_total', { outcome: 'executed' }), 0);
    } finally {
      await waypoint.close();
    }
  });
});

describe('Prometheus metrics in one process', () => {
  it('counts failed attempts (retried or not), runs by the status they ended in, and lease losses', async () => {
    const telemetry = new PrometheusTelemetry();
    await pauseAndResume({ telemetry, failDraftOnce: true });
    const r = telemetry.registry;
    assert.equal(await sample(r, 'waypoint_step_failures_total', { pipeline: 'observed', retried: 'true' }), 1);
    assert.equal(await sample(r, 'waypoint_runs_ended_total', { pipeline: 'observed', status: 'paused' }), 1);
    assert.equal(await sample(r, 'waypoint_runs_ended_total', { pipeline: 'observed', status: 'completed' }), 1);
    assert.equal(await sample(r, 'waypoint_runs_started_total', { pipeline: 'observed', resumed: 'false' }), 1);
    assert.equal(await sample(r, 'waypoint_steps_executed_total', { pipeline: 'observed' }), 4);
    assert.equal(await sample(r, 'waypoint_steps_skipped_total', { pipeline: 'observed' }), 2);

    // A run cancelled from another process while a step runs: the executor's next lease renewal fails.
    const lost = new PrometheusTelemetry();
    let waypoint: Waypoint | undefined;
    const hooks = {
      onPause: async (signal: AbortSignal) => {
        await waypoint!.cancel('blocked');
        await new Promise((resolve) => signal.addEventListener('abort', resolve, { once: true }));
      },
    };
    waypoint = await observedWaypoint(hooks, { telemetry: lost, leaseTtlMs: 150 });
    // The lease heartbeat is unref'd (it never holds a process open); this stands in for the step's own I/O.
    const keepAlive = setTimeout(() => undefined, 10_000);
    try {
      await assert.rejects(waypoint.run(ObservedPipeline, { runId: 'blocked', input: {} }), { code: 'RUN_CANCELLED' });
    } finally {
      clearTimeout(keepAlive);
    }
    assert.equal(await sample(lost.registry, 'waypoint_lease_losses_total'), 1);
    assert.equal(await sample(lost.registry, 'waypoint_runs_ended_total', { pipeline: 'observed', status: 'cancelled' }), 1);
  });

  it('counts a lease loss the executor finds out about from a fenced checkpoint write, not only from a failed renewal', async () => {
    const lost = new PrometheusTelemetry();
    // Cancelled while the step runs; the step returns at once, so its checkpoint write is the first to see the loss.
    const waypoint: Waypoint = await observedWaypoint({ onPause: async () => void (await waypoint.cancel('fenced')) }, { telemetry: lost });
    await assert.rejects(waypoint.run(ObservedPipeline, { runId: 'fenced', input: {} }), { code: 'RUN_CANCELLED' });
    assert.equal(await sample(lost.registry, 'waypoint_lease_losses_total'), 1);
  });

  it('shares metrics between two PrometheusTelemetry on one registry, and serves any registry through metricsHandler', async () => {
    const registry = new Registry();
    const a = new PrometheusTelemetry(registry);
    const b = new PrometheusTelemetry({ registry });
    a.leaseLost();
    b.leaseLost();
    assert.equal(await sample(registry, 'waypoint_lease_losses_total'), 2);
    const { createServer } = await import('node:http');
    const server = createServer(metricsHandler(registry)).listen(0, '127.0.0.1');
    await new Promise((r) => server.once('listening', r));
    try {
      const { port } = server.address() as { port: number };
      const response = await fetch(`http://127.0.0.1:${port}/anything`);
      assert.match(await response.text(), /^waypoint_lease_losses_total 2$/m);
    } finally {
      await new Promise((r) => server.close(r));
    }
  });
});
