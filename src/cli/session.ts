import { Container } from 'inversify';
import type { Integrity } from '../core/history/row-integrity';
import { readPlan, type PipelinePlan } from '../core/plan/plan-reader';
import type { Telemetry } from '../contract/telemetry';
import { TOKENS } from '../contract/tokens';
import { Waypoint } from '../composition/waypoint';
import { composeTelemetry } from '../integrations/compose-telemetry';
import { CliLogger } from './cli-logger';
import { CliError, EXIT, usageError } from './exit-codes';
import type { CliIo } from './output';
import { defaultSqlitePath } from '../storage/sql/options';
import { parseStoreUrl, type StoreTarget } from './store-url';
import { loadUserModule, type WaypointCliModule } from './user-module';

/** Options every command accepts (program-level flags). */
export interface GlobalOptions {
  store?: string;
  module?: string;
  json?: boolean;
  verbose?: boolean;
  progress?: boolean;
}

/** An open Waypoint for one command, with what the command needs to know about its configuration. */
export interface Session {
  readonly waypoint: Waypoint;
  /** Where the store is, for messages (`sqlite:/abs/path.db`, masked URLs). */
  readonly storeDisplay: string;
  /** How rows are sealed (the module's `hmacKey`, else WAYPOINT_HMAC_KEY). */
  readonly integrity: Integrity;
  /** The module configured encryption at rest, so the store decrypts payloads. */
  readonly encrypted: boolean;
  /** Plans of the pipelines the module exports, by pipeline name. */
  readonly plans: Map<string, PipelinePlan>;
  /** Whether the `--store` target was already set up before this session (undefined for a module-bound store). */
  readonly wasInitialized: boolean | undefined;
  close(): Promise<void>;
}

export interface SessionOptions {
  /** The command, for messages and the module's context. */
  command: string;
  /** Create the store when absent (`migrate`); read commands refuse an uninitialized store instead. */
  create?: boolean;
  /** Extra telemetry (progress of `runs resume`), composed with the module's own. */
  telemetry?: Telemetry;
}

/**
 * Opens the store named by `--store` / WAYPOINT_STORE, with the user's module (`--module` /
 * WAYPOINT_MODULE) supplying pipelines, bindings and runtime options. See {@link WaypointCliModule}.
 *
 * @example
 * const session = await openSession(globals, io, { command: 'runs list' });
 * try { ... session.waypoint.store.listRuns() ... } finally { await session.close(); }
 */
export async function openSession(globals: GlobalOptions, io: CliIo, options: SessionOptions): Promise<Session> {
  const env = process.env;
  const storeText = globals.store ?? (env.WAYPOINT_STORE || undefined);
  const modulePath = globals.module ?? (env.WAYPOINT_MODULE || undefined);
  let target: StoreTarget | undefined = storeText === undefined ? undefined : parseStoreUrl(storeText);
  const user: WaypointCliModule = modulePath ? await loadUserModule(modulePath) : {};
  const created = (await user.createWaypointOptions?.({ command: options.command, storeUrl: target?.display, env })) ?? {};
  const { modules = [], container = new Container(), pipelines = [], ...runtime } = created;
  await container.loadAsync(...modules);

  const userBindsStore = container.isBound(TOKENS.CheckpointStore);
  if (target && userBindsStore) {
    throw usageError(`--store ${target.display} was given, but module '${modulePath}' also binds a checkpoint store: use one or the other.`);
  }
  if (!target && !userBindsStore) {
    // The library's own default (Waypoint.create with no store module), so the CLI reads what a program
    // run in this directory wrote; said on stderr, since it is a guess about which store was meant.
    target = parseStoreUrl(`sqlite:${defaultSqlitePath()}`);
    io.err(`waypoint: no --store given; using the default store ${target.display} (pass --store or set WAYPOINT_STORE for another)\n`);
  }
  let wasInitialized: boolean | undefined;
  if (target) {
    wasInitialized = await target.initialized();
    if (!options.create && !wasInitialized) {
      throw new CliError(
        'STORE_NOT_INITIALIZED',
        `${target.display} holds no Waypoint store (${target.backend === 'sqlite' ? 'no such file' : 'no waypoint tables there'}). Check --store, or run 'waypoint-durable migrate' to create it.`,
        EXIT.STORE_UNAVAILABLE,
      );
    }
    await container.loadAsync(target.module());
  }
  if (!container.isBound(TOKENS.Logger)) container.bind(TOKENS.Logger).toConstantValue(new CliLogger(io, globals.verbose === true));
  if (options.telemetry) {
    const own = container.isBound(TOKENS.Telemetry) ? container.get(TOKENS.Telemetry) : undefined;
    if (own) await container.unbindAsync(TOKENS.Telemetry);
    container.bind(TOKENS.Telemetry).toConstantValue(own ? composeTelemetry(own, options.telemetry) : options.telemetry);
  }

  const all = [...(user.pipelines ?? []), ...pipelines];
  // WAYPOINT_HMAC_KEY seals what `runs resume` writes as well as what `verify` checks.
  const hmac = runtime.hmacKey ?? (env.WAYPOINT_HMAC_KEY || undefined);
  const waypoint = await Waypoint.create({ ...runtime, hmacKey: hmac, container, pipelines: all });
  return {
    waypoint,
    storeDisplay: target?.display ?? `${waypoint.store.backend} store bound by ${modulePath}`,
    integrity: hmac === undefined ? {} : { hmacKey: Buffer.isBuffer(hmac) ? hmac : Buffer.from(hmac, 'utf8') },
    encrypted: runtime.encryption !== undefined,
    plans: new Map(all.map((p) => readPlan(p)).map((plan) => [plan.name, plan])),
    wasInitialized,
    close: () => waypoint.close(),
  };
}
