/**
 * The Redis 'async' crash worker: runs (or resumes) one run of a straight line of quick steps with
 * `durability: 'async'` on Redis, so up to 8 rows are in flight when it is killed. Every step first appends
 * its index to RAN_FILE (synchronously: the line is there even if the process dies right after), then
 * returns. Prints its RunResult as the last JSON line.
 *
 *   node dist/test/crash/redis-async-worker.js <runId>
 *
 * Environment: REDIS_PREFIX (the store's key prefix), RAN_FILE, STEPS; WAYPOINT_TEST_REDIS_URL.
 */
import 'reflect-metadata';
import { appendFileSync } from 'node:fs';
import { IsInt, IsOptional, IsString, Min } from 'class-validator';
import { ContainerModule } from 'inversify';
import { Agent, Pipeline, Step, TOKENS, Waypoint, WaypointError, redisStorage, type Logger, type StepContext } from '../../src/index';

const silent: Logger = { debug() {}, info() {}, warn() {}, error() {} };

export class LineState {
  @IsOptional()
  @IsString()
  value?: string;

  @IsOptional()
  @IsInt()
  @Min(0)
  at?: number;
}

/** One agent with `steps` steps s0..s{steps-1}; step i records `i` in `ranFile` and sets `at` to i. */
function linePipeline(steps: number, ranFile: string): new () => object {
  class Line extends Agent {}
  for (let i = 0; i < steps; i++) {
    const index = i;
    const method = function (_ctx: StepContext<LineState>) {
      appendFileSync(ranFile, `${index}\n`);
      return Promise.resolve({ value: `v${index}`.padEnd(200, '.'), at: index });
    };
    Object.defineProperty(Line.prototype, `s${index}`, { value: method, writable: true, configurable: true });
    Step()(Line.prototype, `s${index}`, Object.getOwnPropertyDescriptor(Line.prototype, `s${index}`)!);
  }
  class RedisAsyncLine {}
  Pipeline({ name: 'redis-async-line', version: '1.0.0', state: LineState, agents: [Line] })(RedisAsyncLine);
  return RedisAsyncLine;
}

async function main(): Promise<void> {
  const env = process.env;
  const runId = process.argv[2];
  if (!runId || !env.REDIS_PREFIX || !env.RAN_FILE) throw new Error('usage: REDIS_PREFIX=... RAN_FILE=... redis-async-worker <runId>');
  const pipeline = linePipeline(Number(env.STEPS || 300), env.RAN_FILE);
  const waypoint = await Waypoint.create({
    modules: [
      redisStorage({ url: env.WAYPOINT_TEST_REDIS_URL ?? 'redis://127.0.0.1:6379', keyPrefix: env.REDIS_PREFIX }),
      new ContainerModule(({ bind }) => void bind(TOKENS.Logger).toConstantValue(silent)),
    ],
    pipelines: [pipeline],
    workerId: 'redis-async-worker',
    durability: 'async',
  });
  try {
    process.stdout.write('{"started":true}\n');
    const result = await waypoint.run(pipeline, { runId, input: {} });
    process.stdout.write(JSON.stringify(result) + '\n');
  } finally {
    await waypoint.close();
  }
}

main().catch((error: unknown) => {
  const described =
    error instanceof WaypointError
      ? { code: error.code, name: error.name, message: error.message }
      : { code: null, name: error instanceof Error ? error.name : 'Error', message: error instanceof Error ? (error.stack ?? error.message) : String(error) };
  process.stdout.write(JSON.stringify({ error: described }) + '\n');
  process.exitCode = 1;
});
