import { Container, type ContainerModule } from 'inversify';
import { hostname } from 'node:os';
import { randomBytes } from 'node:crypto';
import type { Class } from '../decorators/options';
import type { CheckpointStore, RunRecord } from '../contract/checkpoint-store';
import type { PipelineCheckpoint } from '../core/history/checkpoint-manager';
import { childEnded, itemPipelinesOf, listShownRuns } from '../core/flow/fan-out';
import { verifySteps } from '../core/history/row-integrity';
import { undecodableInput, undecodableRows } from '../core/history/row-decoding';
import { RetentionManager } from '../core/history/retention';
import { SystemClock } from '../core/ports/clock';
import { type Clock } from '../contract/clock';
import { CheckpointCorruptedError, InputMismatchError, InvalidStateError, PipelineMismatchError, RunNotFoundError, WaypointError } from '../contract/errors';
import { JsonLogger, type Logger } from '../contract/logger';
import { NoopTelemetry } from '../core/ports/telemetry';
import { appendCancelled, resolveStreamLimits } from '../core/stream/run-stream-writer';
import type { ResolvedOptions } from '../core/run/options';
import type { WaypointOptions } from '../contract/options';
import { readPlan, type PipelinePlan } from '../core/plan/plan-reader';
import { loadRunProgress, loadRunsProgress } from '../core/history/progress-reads';
import { RunExecutor } from '../core/step/run-executor';
import { defaultWorkerId } from '../core/lease/run-lease';
import { RunDriver, type DriverChildren } from '../core/run/run-driver';
import { type RunOptions, type RunResult } from '../core/run/run-options';
import { serialize } from '../core/state/serializer';
import { deserialize } from '../core/state/value-decoder';
import { deliverSignal, signalPayloadLimit } from '../core/step/signal-delivery';
import { assertSecretsProtected, createState, validateState } from '../core/state/state-schema';
import { assertPatchDeclared } from '../core/plan/strict-state';
import { resumeHintFor } from '../core/run/run-status';
import { forkRun, type ForkOptions } from '../core/history/fork';
import type { ShutdownOptions } from '../core/lease/shutdown-harness';
import { runUntilSignal } from './run-until-signal';
import { TOKENS } from '../contract/tokens';
import { checkRunId } from '../core/run/run-id';
import { bindDefaultFleet, defaultStorage, storeWith } from './defaults';
import { ChildRuns } from './child-runs';
import { CheckpointReader } from './checkpoint-reader';
import { initialState, sameInput, toInfo, type ListFilter, type RunInfo } from './run-info';
import { JOINS_KEY, joinLabels } from '../core/flow/join-rows';
import { RunStreamReader, type StreamOptions } from './run-stream-reader';
import { copyForkStream } from './fork-stream';
import { checkLeasesNow, registerLiveWorker } from '../core/lease/process-registry';
import { signApprovalToken, type ApprovalLinkOptions } from '../core/step/approval-token';

export type { ListFilter, RunInfo } from './run-info';
import { FLEET, type EnqueueOptions, type EnqueueResult, type FleetHost, type FleetWorkerHandle, type WorkerOptions } from '../core/run/fleet-port';

/** Options of `Waypoint.create`. */
export interface CreateOptions extends WaypointOptions {
  /** Container modules to load: a storage module, your own bindings. Default storage: SQLite file. */
  modules?: ContainerModule[];
  /** Your own container (agents and services bound in it). Waypoint adds its bindings where missing. */
  container?: Container;
  /** Pipelines that `resume(runId)` may have to run, by their recorded name. `run()` registers too. */
  pipelines?: Class[];
}

export type { RunFleet, RunOptions, RunResult } from '../core/run/run-options';

/**
 * The public entry point: starts, resumes and inspects runs. Everything it uses is resolved from an
 * Inversify container, so any part can be swapped by a binding.
 *
 * @example
 * const waypoint = await Waypoint.create();                 // SQLite file under ./.waypoint
 * const result = await waypoint.run(FinancialAnalysis, { runId: 'q3-aapl', input: { ticker: 'AAPL' } });
 * // the same call after a crash resumes 'q3-aapl' from its last checkpoint
 */
export class Waypoint implements FleetHost {
  readonly container: Container;
  readonly store: CheckpointStore;
  private readonly options: ResolvedOptions;
  private readonly maxSignalPayloadBytes: number;
  private readonly clock: Clock;
  private readonly logger: Logger;
  private readonly driver: RunDriver;
  /** Child runs of a forEach over a `@Pipeline` class, in process or queued for the fleet (./child-runs.ts). */
  private readonly childRuns: ChildRuns;
  private readonly reader: CheckpointReader;
  /** Folding, archiving and pruning of stored checkpoints (see `RetentionOptions`). */
  readonly retention: RetentionManager;
  private readonly pipelines = new Map<string, PipelinePlan>();
  /** Ends this instance's claim that its worker id is alive in this process (see `registerLiveWorker`). */
  private readonly unregisterWorker: () => void;

  private constructor(container: Container) {
    this.container = container;
    const given = container.get(TOKENS.Options);
    const inner = container.get(TOKENS.CheckpointStore);
    this.store = storeWith(inner, given.encryption);
    this.clock = container.get(TOKENS.Clock);
    this.logger = container.get(TOKENS.Logger);
    const leaseTtlMs = given.leaseTtlMs ?? 30_000;
    this.options = {
      workerId: given.workerId ?? defaultWorkerId(randomBytes(3).toString('hex')),
      leaseTtlMs,
      heartbeatMs: given.heartbeatMs ?? Math.max(10, Math.floor(leaseTtlMs / 3)),
      waitForLockMs: given.waitForLockMs ?? 0,
      validateEveryStep: given.validateEveryStep ?? true,
      strictState: given.strictState ?? false,
      durability: given.durability ?? 'sync',
      onCorruption: given.onCorruption ?? 'fail',
      encrypted: given.encryption !== undefined,
      liveOutput: resolveStreamLimits(given.liveOutput),
      integrity: given.hmacKey === undefined ? {} : { hmacKey: Buffer.isBuffer(given.hmacKey) ? given.hmacKey : Buffer.from(given.hmacKey, 'utf8') },
    };
    this.maxSignalPayloadBytes = signalPayloadLimit(given.maxSignalPayloadBytes);
    this.unregisterWorker = registerLiveWorker(this.options.workerId);
    this.retention = new RetentionManager(this.store, this.clock, this.options.integrity, given.retention);
    const telemetry = container.get(TOKENS.Telemetry);
    const executor = new RunExecutor(container, this.store, this.clock, this.logger, telemetry);
    // The child-run service needs the driver and the driver calls it: these late-bound calls close the loop.
    const children: DriverChildren = {
      run: (plan, spec) => this.childRuns.runChild(plan, spec),
      state: (plan, runId, collectIndex) => this.childRuns.childState(plan, runId, collectIndex),
      fanOut: (plan, spec, fleet) => this.childRuns.fanOut(plan, spec, fleet),
      itemChild: (plan, spec) => this.childRuns.itemChild(plan, spec),
    };
    this.driver = new RunDriver({ store: this.store, clock: this.clock, logger: this.logger, options: this.options, executor, retention: this.retention, telemetry, children });
    this.childRuns = new ChildRuns(this, this.driver, this.logger, this.options.integrity);
    this.reader = new CheckpointReader(this.store, this.options.integrity, (name) => this.pipelines.get(name), this.childRuns);
  }

  /** Builds the container (your modules first, defaults for what they leave unbound) and initializes the store. */
  static async create(options: CreateOptions = {}): Promise<Waypoint> {
    const { modules = [], container = new Container(), pipelines = [], ...runtime } = options;
    await container.loadAsync(...modules);
    if (!container.isBound(TOKENS.CheckpointStore)) await container.loadAsync(defaultStorage());
    if (!container.isBound(TOKENS.Clock)) container.bind(TOKENS.Clock).toConstantValue(new SystemClock());
    if (!container.isBound(TOKENS.Logger)) container.bind(TOKENS.Logger).toConstantValue(new JsonLogger());
    if (!container.isBound(TOKENS.Telemetry)) container.bind(TOKENS.Telemetry).toConstantValue(new NoopTelemetry());
    if (!container.isBound(TOKENS.Options)) container.bind(TOKENS.Options).toConstantValue(runtime);
    bindDefaultFleet(container);
    const waypoint = new Waypoint(container);
    try {
      await waypoint.store.init();
    } catch (error) {
      waypoint.unregisterWorker();
      throw error;
    }
    for (const pipeline of pipelines) waypoint.register(pipeline);
    return waypoint;
  }

  /** Makes a pipeline known to `resume(runId)` by its name. */
  register(pipeline: Class): void {
    const plan = readPlan(pipeline);
    this.pipelines.set(plan.name, plan);
    // The hidden pipelines of its distributed forEach bodies: their item runs resume here too.
    for (const items of itemPipelinesOf(plan)) {
      const itemPlan = readPlan(items);
      this.pipelines.set(itemPlan.name, itemPlan);
    }
  }

  /**
   * Starts run `runId` with `input`, or resumes it if it exists: completed steps are skipped (their
   * recorded outputs stand) and execution continues at the cursor. A completed run returns its recorded
   * result without running anything.
   */
  async run<S = Record<string, unknown>>(pipeline: Class, options: RunOptions): Promise<RunResult<S>> {
    const { run, plan, created } = await this.prepare(pipeline, options);
    return this.driver.advance<S>(plan, run, options, created);
  }

  /**
   * Creates run `runId` from a validated `input` without executing it, or returns the stored run after
   * checking it belongs to this pipeline and (when given) has the same input. `run` and the fleet's
   * `enqueue` both start here, so a bad input fails in the caller and writes nothing.
   *
   * @example
   * const { created } = await waypoint.prepare(FinancialAnalysis, { runId: 'q3-aapl', input: { ticker: 'AAPL' } });
   */
  async prepare(
    pipeline: Class,
    options: { runId: string; input?: unknown; parentRunId?: string },
    metadata: Record<string, string> = {},
  ): Promise<{ run: RunRecord; plan: PipelinePlan; created: boolean }> {
    const plan = readPlan(pipeline);
    this.pipelines.set(plan.name, plan);
    const runId = checkRunId(options?.runId);
    const existing = await this.store.getRun(runId);
    if (existing) {
      if (existing.pipelineName !== plan.name) {
        await this.assertIntact(runId);
        throw new PipelineMismatchError(runId, existing.pipelineName, plan.name);
      }
      if (options.input !== undefined && !sameInput(plan, runId, options.input, this.options.strictState, existing.input)) {
        // A stored input altered behind Waypoint's back is corruption, not the caller's mistake.
        await this.assertIntact(runId);
        throw new InputMismatchError(runId);
      }
      return { run: existing, plan, created: false };
    }
    if (options.input === undefined) {
      throw new InvalidStateError(`Run '${runId}' does not exist yet and no input was given. Pass { runId, input } to start it.`, [], { runId });
    }
    const input = initialState(plan, runId, options.input, this.options.strictState);
    const state = createState(plan.state, deserialize(input), { runId });
    validateState(plan.state, state, { runId, phase: 'in the input' });
    assertSecretsProtected(plan.secrets, this.options.encrypted, state, { runId, what: 'input' });
    // A control-flow run names its joined constructs: a reader without the pipeline folds its rows by them (core/flow/join-rows.ts).
    const joins = plan.linear ? {} : { [JOINS_KEY]: JSON.stringify(joinLabels(plan.flow)) };
    const env = serialize({ host: hostname(), pid: String(process.pid), node: process.version, worker: this.options.workerId, ...joins, ...metadata });
    const parent = options.parentRunId === undefined ? {} : { parentRunId: options.parentRunId };
    const { run, created } = await this.store.createRun({ runId, pipelineName: plan.name, pipelineVersion: plan.version, input, metadata: env, ...parent });
    if (!created && run.pipelineName !== plan.name) throw new PipelineMismatchError(runId, run.pipelineName, plan.name);
    return { run, plan, created };
  }

  /**
   * Checks every stored row of run `runId` as a resume would (seals, chain, first and last rows, and that
   * its input and every row's payloads can be read back by this process) without writing anything; throws
   * `CheckpointCorruptedError` naming the first problem (sequence 0: the run's input), `RUN_NOT_FOUND`
   * when the run does not exist.
   *
   * @example
   * await waypoint.verify('q3-aapl'); // resolves when every row is intact
   */
  async verify(runId: string): Promise<void> {
    const loaded = await this.store.loadRun(checkRunId(runId));
    if (!loaded) throw new RunNotFoundError(runId);
    verifySteps(loaded.run, loaded.steps, this.options.integrity);
    // Sealed rows may still hold what this process cannot read (written by another process or release).
    const input = undecodableInput(loaded.run);
    if (input !== null) throw new CheckpointCorruptedError(runId, 0, input);
    const [undecodable] = undecodableRows(loaded.run, loaded.steps);
    if (undecodable) throw undecodable.error;
  }

  /** Throws `CheckpointCorruptedError` when the stored run fails its integrity checks. */
  private async assertIntact(runId: string): Promise<void> {
    const loaded = await this.store.loadRun(runId);
    if (loaded) verifySteps(loaded.run, loaded.steps, this.options.integrity);
  }

  /** Resumes a stored run with the pipeline registered under its recorded name. */
  async resume<S = Record<string, unknown>>(runId: string, options: Omit<RunOptions, 'runId' | 'input'> = {}): Promise<RunResult<S>> {
    const run = await this.store.getRun(checkRunId(runId));
    if (!run) throw new RunNotFoundError(runId);
    const plan = this.pipelines.get(run.pipelineName);
    if (!plan) {
      throw new WaypointError(
        'PIPELINE_NOT_REGISTERED',
        `Run '${runId}' belongs to pipeline '${run.pipelineName}', which this Waypoint does not know. Pass it in Waypoint.create({ pipelines: [...] }) or call waypoint.register(Pipeline).`,
        { runId },
      );
    }
    return this.driver.advance<S>(plan, run, { ...options, runId });
  }

  /**
   * `run`, with SIGTERM / SIGINT (and an optional deadline) turned into a clean pause: the handlers are
   * installed for this call only and removed afterwards. Sets `process.exitCode` (0 completed, 75 paused
   * or waiting) so a supervisor knows to restart the process; a failure rejects as usual.
   *
   * @example
   * await waypoint.runUntilSignal(FinancialAnalysis, { runId: 'q3-aapl', input }, { deadline: lambdaEnd, deadlineBufferMs: 30_000 });
   */
  runUntilSignal<S = Record<string, unknown>>(pipeline: Class, options: RunOptions, shutdown: ShutdownOptions = {}): Promise<RunResult<S>> {
    return runUntilSignal<S>((p, o) => this.run<S>(p, o), this.logger, pipeline, options, shutdown);
  }

  /** The stored run, or null when the id is unknown. */
  async get(runId: string): Promise<RunInfo | null> {
    const run = await this.store.getRun(checkRunId(runId));
    return run ? toInfo(run, await loadRunProgress(this.store, run, this.planOf(run), this.options.integrity)) : null;
  }

  /**
   * Stored runs, most recently updated first. The items of a distributed agent or sequence body
   * (`forEach(..., { distribute: true })`) are left out unless `includeItems` is set, `parentRunId` asks
   * for a run's children or `pipelineName` names their pipeline.
   */
  async list(filter: ListFilter = {}): Promise<RunInfo[]> {
    const { includeItems, ...query } = filter;
    const runs = includeItems === true ? await this.store.listRuns(query) : await listShownRuns(this.store, query);
    const progress = await loadRunsProgress(this.store, runs, (run) => this.planOf(run), this.options.integrity);
    return runs.map((run, i) => toInfo(run, progress[i]));
  }

  /** The registered plan a run's progress counts from: its pipeline's, when the version is the run's. */
  private planOf(run: RunRecord): PipelinePlan | undefined {
    const plan = this.pipelines.get(run.pipelineName);
    return plan && plan.version === run.pipelineVersion ? plan : undefined;
  }

  /** The checkpoint read model at `sequence` (default: the latest). */
  checkpoint(runId: string, sequence?: number): Promise<PipelineCheckpoint> {
    return this.reader.checkpoint(runId, sequence);
  }

  /**
   * Every checkpoint of a run, oldest first: sequence 0 (the input state, nothing completed) and then one
   * per recorded step. After retention folded the start, the first is the base snapshot.
   */
  checkpoints(runId: string): Promise<PipelineCheckpoint[]> {
    return this.reader.checkpoints(runId);
  }

  /** The run's live output from offset `from`, until it ends when following: `for await (const e of waypoint.stream(id, { from }))` (docs/live-output-reading.md). */
  stream(runId: string, options: StreamOptions = {}): RunStreamReader {
    return new RunStreamReader(this.store, checkRunId(runId), options);
  }

  /**
   * Cancels a run from any process. A live executor is fenced out at once (its lease epoch is bumped):
   * it stops at its next write or lease renewal. A cancelled run is never resumed by accident.
   */
  async cancel(runId: string, reason = 'cancelled by request'): Promise<RunInfo> {
    const run = await this.store.cancelRun(checkRunId(runId), resumeHintFor(runId, 'cancelled', `(${reason})`));
    if (!run) throw new RunNotFoundError(runId);
    if (run.status !== 'cancelled') {
      throw new WaypointError('INVALID_TRANSITION', `Run '${runId}' is already ${run.status}; it cannot be cancelled.`, { runId });
    }
    this.logger.info('run cancelled', { runId, pipeline: run.pipelineName, reason });
    checkLeasesNow(run.runId); // its executor in this process aborts the running step's ctx.signal now
    await appendCancelled(this.store, run.runId, this.logger);
    // Its child runs (a forEach over a @Pipeline class) are cancelled with it, queued or running.
    for (const child of await this.store.listRuns({ parentRunId: run.runId })) {
      if (!childEnded(child)) await this.childRuns.cancelTree(child.runId, `parent '${run.runId}' cancelled`);
    }
    return toInfo(run, await loadRunProgress(this.store, run, this.planOf(run), this.options.integrity));
  }

  /**
   * Delivers signal `name` with `payload` to a run (from any process). A step waiting on
   * `ctx.waitFor(name)` gets it when the run resumes (or at once, when its executor is holding). The first
   * delivery wins; returns false when the signal had already been delivered. A name outside the rule of
   * `checkSignalName` (INVALID_SIGNAL_NAME) or a payload over `maxSignalPayloadBytes` (SIGNAL_PAYLOAD_TOO_LARGE,
   * default 256 KiB) is refused before anything is read or stored.
   *
   * @example
   * await waypoint.signal('q3-aapl', 'approval', { approvedBy: 'dana' });
   */
  async signal(runId: string, name: string, payload?: unknown): Promise<boolean> {
    return deliverSignal(this.store, runId, name, payload, this.maxSignalPayloadBytes);
  }

  /**
   * A signed, expiring token that delivers signal `signal` (with `payload`) to run `runId` once, through
   * `POST /approve/:token` of `waypoint-durable/http`; signed with `hmacKey` (docs/http.md).
   *
   * @example
   * const token = await waypoint.approvalLink('invoice-7', 'approval', { expiresIn: '48h', payload: { approved: true } });
   */
  approvalLink(runId: string, signal: string, options: ApprovalLinkOptions): Promise<string> {
    const key = this.options.integrity.hmacKey;
    if (!key) throw new WaypointError('INVALID_OPTIONS', `Approval links for run '${runId}' are signed with hmacKey: pass it to Waypoint.create({ hmacKey }).`, { runId });
    return signApprovalToken(this.store, key, runId, signal, options);
  }

  /**
   * Starts a new run from a point of an existing one (time travel): the steps before it are copied, the
   * original is untouched. The new run is `paused`; `resume(newRunId)` continues it. Its live output
   * starts with the source's parts of the copied steps' recorded attempts (docs/live-output-reading.md).
   *
   * @example
   * await waypoint.fork('q3-aapl', { fromStep: 'ValidationAgent/validate', newRunId: 'q3-aapl-retry', patchState: { strict: true } });
   */
  async fork(runId: string, options: ForkOptions): Promise<RunInfo> {
    checkRunId(runId);
    checkRunId(options?.newRunId, 'newRunId');
    await assertPatchDeclared(this.store, this.pipelines, this.options.strictState, runId, options);
    const { sequence } = await forkRun(this.store, this.clock, this.options.workerId, runId, options, this.options.integrity);
    await copyForkStream(this.store, this.logger, this.options.workerId, runId, options.newRunId, sequence);
    return (await this.get(options.newRunId))!;
  }

  /**
   * Queues run `runId` for the fleet (pg-boss or BullMQ, bound with `pgBossQueue` / `bullmqQueue`): the
   * input is validated and the run created now; the same runId twice is one run.
   *
   * @example
   * await waypoint.enqueue(FinancialAnalysis, { runId: 'q3-aapl', input: { ticker: 'AAPL' }, priority: 5 });
   */
  enqueue<I = Record<string, unknown>>(pipeline: Class, options: EnqueueOptions<I>): Promise<EnqueueResult> {
    return this.container.get(FLEET).enqueue(this, pipeline, options);
  }

  /**
   * Starts a fleet worker in this process: it takes queued runs and executes them under the run lease;
   * SIGTERM pauses its runs at the next step boundary and puts them back on the queue.
   *
   * @example
   * const worker = await waypoint.worker({ pipelines: [FinancialAnalysis], concurrency: 4 }); await worker.stopped;
   */
  worker(options: WorkerOptions): Promise<FleetWorkerHandle> {
    return this.container.get(FLEET).worker(this, options);
  }

  /** Closes the run queue (if one is bound) and the store's connections. */
  async close(): Promise<void> {
    this.unregisterWorker();
    if (this.container.isBound(FLEET)) await this.container.get(FLEET).close(this);
    await this.store.close();
  }
}
