import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Counter, Gauge, Histogram, Registry, type Metric } from 'prom-client';
import type { ModelCallEvent, StepEvent, Telemetry } from '../contract/telemetry';
import type { CheckpointStore, RunStatus } from '../contract/checkpoint-store';

const STATUSES: readonly RunStatus[] = ['running', 'paused', 'waiting', 'completed', 'failed', 'cancelled'];
const OUTCOMES = ['executed', 'reused', 'reconciled', 'failed'] as const;

/** Options of {@link PrometheusTelemetry}. */
export interface PrometheusTelemetryOptions {
  /** Registry to register the metrics in. Default: a new one (read it from `telemetry.registry`). */
  registry?: Registry;
  /** Prefix of every metric name. Default `waypoint_`. */
  prefix?: string;
  /**
   * Also export `<prefix>runs{status}`: the number of stored runs in each status, read with
   * `store.listRuns()` when the registry is scraped, at most once per `minIntervalMs` (default 15 s),
   * since listing costs one query over every run.
   */
  runsByStatus?: { store: CheckpointStore; minIntervalMs?: number };
  /** Histogram buckets, to override the defaults. */
  buckets?: { checkpointSeconds?: number[]; payloadBytes?: number[]; stepSeconds?: number[]; resumeSeconds?: number[] };
}

/**
 * Prometheus metrics of the runtime (prom-client), bound as `TOKENS.Telemetry`. Metric names (prefix
 * `waypoint_`): `checkpoint_write_duration_seconds{backend}` and `checkpoint_payload_bytes{backend}`
 * (histograms), `steps_executed_total{pipeline}`, `steps_skipped_total{pipeline}` (restored from a
 * checkpoint on resume), `step_duration_seconds{pipeline}`, `step_failures_total{pipeline,retried}`,
 * `resume_duration_seconds{pipeline}` (load and restore of a resumed run), `runs_started_total{pipeline,resumed}`,
 * `runs_ended_total{pipeline,status}`, `side_effects_total{outcome}`, `lease_losses_total`,
 * `model_calls_total{outcome}` and `model_tokens_total{kind,outcome}` (recorded model calls of `waypoint/ai`:
 * kind `input` | `output`; outcome `executed`, tokens paid for, or `reused`, tokens a resume saved), and with
 * `runsByStatus` the gauge `runs{status}`. Labels stay bounded: pipeline names, backends, statuses and
 * outcomes only (never run ids or operation names, which `guardedExecute` may derive from data).
 *
 * @example
 * const telemetry = new PrometheusTelemetry({ runsByStatus: { store } });
 * const waypoint = await Waypoint.create({ modules: [telemetryModule(telemetry)] });
 * await serveMetrics({ registry: telemetry.registry, port: 9464 });
 */
export class PrometheusTelemetry implements Telemetry {
  readonly registry: Registry;
  private readonly checkpointSeconds: Histogram<'backend'>;
  private readonly payloadBytes: Histogram<'backend'>;
  private readonly stepsExecuted: Counter<'pipeline'>;
  private readonly stepsSkipped: Counter<'pipeline'>;
  private readonly stepSeconds: Histogram<'pipeline'>;
  private readonly stepFailures: Counter<'pipeline' | 'retried'>;
  private readonly resumeSeconds: Histogram<'pipeline'>;
  private readonly runsStarted: Counter<'pipeline' | 'resumed'>;
  private readonly runsEnded: Counter<'pipeline' | 'status'>;
  private readonly sideEffects: Counter<'outcome'>;
  private readonly leaseLosses: Counter;
  private readonly modelCalls: Counter<'outcome'>;
  private readonly modelTokens: Counter<'kind' | 'outcome'>;

  constructor(options: PrometheusTelemetryOptions | Registry = {}) {
    const opts: PrometheusTelemetryOptions = options instanceof Registry ? { registry: options } : options;
    const registry = (this.registry = opts.registry ?? new Registry());
    const p = opts.prefix ?? 'waypoint_';
    const make = metricMaker(registry, p);
    // Made in the order they are exposed in: step metrics, then run metrics.
    const steps = stepMetrics(make, opts.buckets ?? {});
    this.checkpointSeconds = steps.checkpointSeconds;
    this.payloadBytes = steps.payloadBytes;
    this.stepsExecuted = steps.stepsExecuted;
    this.stepsSkipped = steps.stepsSkipped;
    this.stepSeconds = steps.stepSeconds;
    this.stepFailures = steps.stepFailures;
    this.resumeSeconds = steps.resumeSeconds;
    const runs = runMetrics(make);
    this.runsStarted = runs.runsStarted;
    this.runsEnded = runs.runsEnded;
    this.sideEffects = runs.sideEffects;
    this.leaseLosses = runs.leaseLosses;
    this.modelCalls = runs.modelCalls;
    this.modelTokens = runs.modelTokens;
    for (const outcome of OUTCOMES) this.sideEffects.inc({ outcome }, 0);
    this.leaseLosses.inc(0);
    if (opts.runsByStatus) registerRunsGauge(registry, p + 'runs', opts.runsByStatus);
  }

  runStarted(event: { runId: string; pipeline: string; resumed: boolean; skipped: number; restoreMs: number }): void {
    this.runsStarted.inc({ pipeline: event.pipeline, resumed: String(event.resumed) });
    if (event.skipped > 0) this.stepsSkipped.inc({ pipeline: event.pipeline }, event.skipped);
    if (event.resumed) this.resumeSeconds.observe({ pipeline: event.pipeline }, event.restoreMs / 1000);
  }

  stepCompleted(event: StepEvent & { attempt: number; durationMs: number; checkpointMs: number; bytes: number }): void {
    this.stepsExecuted.inc({ pipeline: event.pipeline });
    this.stepSeconds.observe({ pipeline: event.pipeline }, event.durationMs / 1000);
    this.checkpointSeconds.observe({ backend: event.backend }, event.checkpointMs / 1000);
    this.payloadBytes.observe({ backend: event.backend }, event.bytes);
  }

  stepFailed(event: StepEvent & { attempt: number; error: unknown; willRetry: boolean }): void {
    this.stepFailures.inc({ pipeline: event.pipeline, retried: String(event.willRetry) });
  }

  sideEffect(event: { outcome: (typeof OUTCOMES)[number] }): void {
    this.sideEffects.inc({ outcome: event.outcome });
  }

  runEnded(event: { pipeline: string; status: string }): void {
    this.runsEnded.inc({ pipeline: event.pipeline, status: event.status });
  }

  leaseLost(): void {
    this.leaseLosses.inc();
  }

  modelCall(event: ModelCallEvent): void {
    this.modelCalls.inc({ outcome: event.outcome });
    this.modelTokens.inc({ kind: 'input', outcome: event.outcome }, event.inputTokens);
    this.modelTokens.inc({ kind: 'output', outcome: event.outcome }, event.outputTokens);
  }

  span<T>(_name: string, _attributes: Record<string, string | number | boolean>, fn: () => Promise<T>): Promise<T> {
    return fn();
  }
}

/** The `runs{status}` gauge, refreshed from the store on scrape (throttled; a failed read keeps the last values). */
function registerRunsGauge(registry: Registry, name: string, source: { store: CheckpointStore; minIntervalMs?: number }): void {
  if (registry.getSingleMetric(name)) return;
  const minIntervalMs = source.minIntervalMs ?? 15_000;
  let readAt = -Infinity;
  let warned = false;
  new Gauge({
    name,
    help: 'Stored runs by status (read from the checkpoint store at scrape time).',
    labelNames: ['status'],
    registers: [registry],
    async collect() {
      if (performance.now() - readAt < minIntervalMs) return;
      try {
        const counts = new Map<string, number>(STATUSES.map((s) => [s, 0]));
        for (const run of await source.store.listRuns()) counts.set(run.status, (counts.get(run.status) ?? 0) + 1);
        for (const [status, count] of counts) this.set({ status }, count);
        readAt = performance.now();
      } catch (error) {
        // A scrape must not fail because the store is briefly down: the previous values stay.
        if (!warned)
          process.emitWarning(`waypoint_runs gauge: could not list runs (${error instanceof Error ? error.message : String(error)}); keeping the last values.`, {
            code: 'WAYPOINT_METRICS',
          });
        warned = true;
      }
    },
  });
}

/**
 * A `node:http` request handler that answers with the registry's metrics in the Prometheus text format.
 * Mount it on your own server's `/metrics` route.
 *
 * @example
 * const handler = metricsHandler(telemetry.registry);
 * http.createServer((req, res) => (req.url === '/metrics' ? handler(req, res) : app(req, res))).listen(8080);
 */
export function metricsHandler(registry: Registry): (req: IncomingMessage, res: ServerResponse) => void {
  return (req, res) => {
    if (req.method !== 'GET' && req.method !== 'HEAD') {
      res.writeHead(405, { allow: 'GET, HEAD' }).end();
      return;
    }
    registry.metrics().then(
      (text) => {
        res.writeHead(200, { 'content-type': registry.contentType, 'content-length': Buffer.byteLength(text) });
        res.end(req.method === 'HEAD' ? undefined : text);
      },
      (error: unknown) => {
        res.writeHead(500, { 'content-type': 'text/plain; charset=utf-8' });
        res.end(`collecting metrics failed: ${error instanceof Error ? error.message : String(error)}\n`);
      },
    );
  };
}

/** A running metrics endpoint. */
export interface MetricsServer {
  readonly server: Server;
  readonly port: number;
  /** e.g. `http://127.0.0.1:9464/metrics`. */
  readonly url: string;
  close(): Promise<void>;
}

/**
 * Starts an HTTP server that serves `registry` on `path` (default `/metrics`) and 404 elsewhere.
 * `port: 0` picks a free port (read it from the result).
 *
 * @example
 * const metrics = await serveMetrics({ registry: telemetry.registry, port: 9464 });
 * // ... on shutdown:
 * await metrics.close();
 */
export async function serveMetrics(options: { registry: Registry; port: number; host?: string; path?: string }): Promise<MetricsServer> {
  const path = options.path ?? '/metrics';
  const handler = metricsHandler(options.registry);
  const server = createServer((req, res) => {
    const url = new URL(req.url ?? '/', 'http://localhost');
    if (url.pathname === path) handler(req, res);
    else res.writeHead(404, { 'content-type': 'text/plain; charset=utf-8' }).end(`not found; metrics are at ${path}\n`);
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port, options.host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  const port = (server.address() as AddressInfo).port;
  const host = options.host && options.host !== '0.0.0.0' && options.host !== '::' ? options.host : '127.0.0.1';
  return {
    server,
    port,
    url: `http://${host.includes(':') ? `[${host}]` : host}:${port}${path}`,
    close: () => new Promise<void>((resolve, reject) => server.close((error) => (error ? reject(error) : resolve()))),
  };
}

/** Builds a metric named `prefix + name` in `registry`, or returns the one a PrometheusTelemetry on the same registry made. */
type MetricMaker = <M extends Metric>(name: string, build: (config: { name: string; registers: Registry[] }) => M) => M;

function metricMaker(registry: Registry, prefix: string): MetricMaker {
  return <M extends Metric>(name: string, build: (config: { name: string; registers: Registry[] }) => M): M =>
    // A second PrometheusTelemetry on the same registry shares the metrics instead of failing on a duplicate name.
    (registry.getSingleMetric(prefix + name) as M | undefined) ?? build({ name: prefix + name, registers: [registry] });
}

/** The metrics of checkpoints and steps: write time and size by backend, steps executed, skipped, failed, resume time. */
function stepMetrics(make: MetricMaker, buckets: NonNullable<PrometheusTelemetryOptions['buckets']>) {
  return {
    checkpointSeconds: make(
      'checkpoint_write_duration_seconds',
      (c) =>
        new Histogram({
          ...c,
          help: 'Time to write one step checkpoint (row and cursor, durable), by backend.',
          labelNames: ['backend'],
          buckets: buckets.checkpointSeconds ?? [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5],
        }),
    ),
    payloadBytes: make(
      'checkpoint_payload_bytes',
      (c) =>
        new Histogram({
          ...c,
          help: 'Serialized size of one step checkpoint (output and changed agent memory), by backend.',
          labelNames: ['backend'],
          buckets: buckets.payloadBytes ?? [256, 1024, 4096, 16_384, 65_536, 262_144, 1_048_576, 4_194_304, 16_777_216],
        }),
    ),
    stepsExecuted: make('steps_executed_total', (c) => new Counter({ ...c, help: 'Steps executed and checkpointed.', labelNames: ['pipeline'] })),
    stepsSkipped: make(
      'steps_skipped_total',
      (c) => new Counter({ ...c, help: 'Completed steps restored from checkpoints on resume instead of running again.', labelNames: ['pipeline'] }),
    ),
    stepSeconds: make(
      'step_duration_seconds',
      (c) =>
        new Histogram({
          ...c,
          help: 'Duration of the successful attempt of a step.',
          labelNames: ['pipeline'],
          buckets: buckets.stepSeconds ?? [0.01, 0.05, 0.1, 0.5, 1, 5, 15, 60, 300, 900, 3600],
        }),
    ),
    stepFailures: make(
      'step_failures_total',
      (c) => new Counter({ ...c, help: 'Failed step attempts; retried="false" when the step gave up.', labelNames: ['pipeline', 'retried'] }),
    ),
    resumeSeconds: make(
      'resume_duration_seconds',
      (c) =>
        new Histogram({
          ...c,
          help: 'Time to load and restore a resumed run from its checkpoints, before its next step starts.',
          labelNames: ['pipeline'],
          buckets: buckets.resumeSeconds ?? [0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 10],
        }),
    ),
  };
}

/** The metrics of runs and what they call: runs started and ended, side effects, lease losses, model calls and tokens. */
function runMetrics(make: MetricMaker) {
  return {
    runsStarted: make('runs_started_total', (c) => new Counter({ ...c, help: 'run / resume calls that started executing.', labelNames: ['pipeline', 'resumed'] })),
    runsEnded: make(
      'runs_ended_total',
      (c) => new Counter({ ...c, help: 'run / resume calls that ended, by the status they left the run in.', labelNames: ['pipeline', 'status'] }),
    ),
    sideEffects: make(
      'side_effects_total',
      (c) => new Counter({ ...c, help: 'Side effects by outcome: executed, reused from the log, reconciled, failed.', labelNames: ['outcome'] }),
    ),
    leaseLosses: make('lease_losses_total', (c) => new Counter({ ...c, help: 'Executors fenced out of their run (lease taken over or run cancelled).' })),
    modelCalls: make(
      'model_calls_total',
      (c) => new Counter({ ...c, help: 'Recorded model calls: executed (paid for) or reused from the log on resume.', labelNames: ['outcome'] }),
    ),
    modelTokens: make(
      'model_tokens_total',
      (c) =>
        new Counter({ ...c, help: 'Tokens of recorded model calls by kind (input, output): executed (spent) or reused (saved by a resume).', labelNames: ['kind', 'outcome'] }),
    ),
  };
}
