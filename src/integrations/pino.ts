import { ContainerModule } from 'inversify';
import pino from 'pino';
import type { LogFields, Logger } from '../contract/logger';
import { currentStep } from '../core/step/run-context';
import { TOKENS } from '../contract/tokens';

type Level = 'debug' | 'info' | 'warn' | 'error';

/**
 * The `Logger` binding on pino. Every record carries the run's coordinates under stable names, so logs
 * of one run (or one step) are one query away: `runId`, `pipeline`, `agent`, `step` (`agentId/stepName`),
 * `sequence` and `attempt`, taken from the fields the runtime passes and, inside a running step or side
 * effect, completed from the step's context (run id, agent, step, attempt). A record whose level is off
 * costs one level check.
 *
 * @example
 * const waypoint = await Waypoint.create({ modules: [pinoLogging({ level: 'info' })] });
 * // {"level":30,"time":...,"runId":"q3-aapl","pipeline":"financial-analysis","agent":"ValidationAgent",
 * //  "step":"ValidationAgent/reviewModel","sequence":8,"attempt":1,"bytes":412,"msg":"checkpoint written"}
 */
export class PinoLogger implements Logger {
  constructor(readonly pino: pino.Logger) {}

  debug(message: string, fields?: LogFields): void {
    this.write('debug', message, fields);
  }
  info(message: string, fields?: LogFields): void {
    this.write('info', message, fields);
  }
  warn(message: string, fields?: LogFields): void {
    this.write('warn', message, fields);
  }
  error(message: string, fields?: LogFields): void {
    this.write('error', message, fields);
  }

  isLevelEnabled(level: Level): boolean {
    return this.pino.isLevelEnabled(level);
  }

  private write(level: Level, message: string, fields: LogFields | undefined): void {
    if (!this.pino.isLevelEnabled(level)) return;
    this.pino[level](withRunContext(fields), message);
  }
}

/**
 * The fields of a record, completed with the current step's coordinates where the caller left them out;
 * `agent` is derived from a `step` key (`agentId/stepName`) when absent.
 *
 * @example
 * withRunContext({ step: 'ResearchAgent/summarize' }) // { step: 'ResearchAgent/summarize', agent: 'ResearchAgent' } (outside a step)
 */
export function withRunContext(fields: LogFields | undefined): LogFields {
  const record: LogFields = { ...fields };
  const active = currentStep();
  if (active) {
    record.runId ??= active.runId;
    record.step ??= active.stepKey;
    record.agent ??= active.agentId;
    record.attempt ??= active.attempt;
    if (active.operation) record.operation ??= active.operation.name;
  }
  if (record.agent === undefined && typeof record.step === 'string') {
    const slash = record.step.indexOf('/');
    if (slash > 0) record.agent = record.step.slice(0, slash);
  }
  return record;
}

/**
 * A {@link PinoLogger} around `logger`, or around a new pino logger built from `options` (default level
 * from WAYPOINT_LOG_LEVEL, else `info`; output to stdout as pino does).
 *
 * @example
 * const logger = pinoLogger(pino({ level: 'debug' }, pino.destination('/var/log/waypoint.log')));
 */
export function pinoLogger(loggerOrOptions: pino.Logger | pino.LoggerOptions = {}): PinoLogger {
  if (isPino(loggerOrOptions)) return new PinoLogger(loggerOrOptions);
  return new PinoLogger(pino({ level: process.env.WAYPOINT_LOG_LEVEL ?? 'info', ...loggerOrOptions }));
}

/**
 * A container module binding `TOKENS.Logger` to pino (see {@link pinoLogger}).
 *
 * @example
 * const waypoint = await Waypoint.create({ modules: [postgresStorage({ url }), pinoLogging(pino({ level: 'info' }))] });
 */
export function pinoLogging(loggerOrOptions: pino.Logger | pino.LoggerOptions = {}): ContainerModule {
  const logger = pinoLogger(loggerOrOptions);
  return new ContainerModule(({ bind }) => {
    bind(TOKENS.Logger).toConstantValue(logger);
  });
}

function isPino(value: pino.Logger | pino.LoggerOptions): value is pino.Logger {
  return typeof (value as pino.Logger).isLevelEnabled === 'function' && typeof (value as pino.Logger).child === 'function';
}
