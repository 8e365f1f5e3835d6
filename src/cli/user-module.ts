import { existsSync } from 'node:fs';
import { resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import type { Class } from '../decorators/options';
import type { CreateOptions } from '../composition/waypoint';
import { readPlan } from '../core/plan/plan-reader';
import { reasonOf } from '../contract/errors';
import { CliError, EXIT, usageError } from './exit-codes';

/** What `createWaypointOptions` is told about the command that loads it. */
export interface CliModuleContext {
  /** The command being run, e.g. `runs resume`. */
  command: string;
  /** The `--store` URL (password masked), or undefined when the module must bind the store itself. */
  storeUrl: string | undefined;
  env: NodeJS.ProcessEnv;
}

/**
 * The contract of the module given to `--module` (or WAYPOINT_MODULE): a compiled JavaScript file
 * (CommonJS or ESM) that exports, by name or on its default export:
 *
 * - `pipelines`: the `@Pipeline` classes whose runs the CLI may resume (required by `runs resume`; with
 *   it `runs show` also lists the steps still to run).
 * - `createWaypointOptions(context)` (optional, may be async): the `Waypoint.create` options your workers
 *   use: `modules` / `container` binding your agents' dependencies (LLM clients, mailers, ...), your
 *   logger or telemetry, and runtime options (`hmacKey`, `encryption`, `leaseTtlMs`, ...). The store:
 *   with `--store` the CLI binds it and your modules must not bind `TOKENS.CheckpointStore`; without
 *   `--store` your modules must bind it.
 *
 * @example
 * // waypoint.config.js
 * const { FinancialAnalysis, exampleModule } = require('./dist/pipeline');
 * exports.pipelines = [FinancialAnalysis];
 * exports.createWaypointOptions = () => ({ modules: [exampleModule({ outboxPath: '/var/spool/outbox.jsonl' })], hmacKey: process.env.WAYPOINT_HMAC_KEY });
 * // then: waypoint-durable --store postgres://... runs resume q3-aapl --module ./waypoint.config.js
 */
export interface WaypointCliModule {
  pipelines?: Class[];
  createWaypointOptions?: (context: CliModuleContext) => CreateOptions | Promise<CreateOptions>;
}

/** Loads and checks the user's module; every problem is a usage error naming the file and what is wrong. */
export async function loadUserModule(path: string, cwd = process.cwd()): Promise<WaypointCliModule> {
  const file = resolve(cwd, path);
  if (!existsSync(file)) throw usageError(`Module '${path}' was not found (looked for ${file}): check the --module path.`);
  let loaded: Record<string, unknown>;
  try {
    loaded = (await import(pathToFileURL(file).href)) as Record<string, unknown>;
  } catch (error) {
    throw new CliError('CLI_MODULE', `Module '${path}' failed to load: ${reasonOf(error)}. Fix what it throws, or check the --module path.`, EXIT.USAGE, { cause: error });
  }
  const fallback = (loaded.default ?? {}) as Record<string, unknown>;
  const pipelines = loaded.pipelines ?? fallback.pipelines;
  const create = loaded.createWaypointOptions ?? fallback.createWaypointOptions;
  if (pipelines !== undefined && !(Array.isArray(pipelines) && pipelines.every((p) => typeof p === 'function'))) {
    throw usageError(`Module '${path}' exports 'pipelines' that is not an array of @Pipeline classes: export an array such as [MyPipeline].`);
  }
  if (create !== undefined && typeof create !== 'function')
    throw usageError(`Module '${path}' exports 'createWaypointOptions' that is not a function: export a function that returns the Waypoint's options.`);
  if (pipelines === undefined && create === undefined) {
    throw usageError(`Module '${path}' exports neither 'pipelines' nor 'createWaypointOptions': export one of them (see the module contract in 'waypoint-durable --help').`);
  }
  // Reading each plan now turns a broken pipeline definition into an error that names the module.
  for (const pipeline of (pipelines as Class[] | undefined) ?? []) {
    try {
      readPlan(pipeline);
    } catch (error) {
      throw usageError(`Module '${path}' exports a pipeline that is not valid: ${reasonOf(error)}.`, error);
    }
  }
  return { pipelines: pipelines as Class[] | undefined, createWaypointOptions: create as WaypointCliModule['createWaypointOptions'] };
}
