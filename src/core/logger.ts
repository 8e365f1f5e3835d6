/** Structured fields attached to a log record (run id, pipeline, agent, step, sequence, attempt, ...). */
export type LogFields = Record<string, unknown>;

/**
 * The logger binding. Any structured logger (pino, winston) fits behind these four methods.
 *
 * @example
 * container.rebind(TOKENS.Logger).toConstantValue(pinoAdapter(pino()));
 */
export interface Logger {
  debug(message: string, fields?: LogFields): void;
  info(message: string, fields?: LogFields): void;
  warn(message: string, fields?: LogFields): void;
  error(message: string, fields?: LogFields): void;
}

const LEVELS = ['debug', 'info', 'warn', 'error', 'silent'] as const;
export type LogLevel = (typeof LEVELS)[number];

/**
 * Default logger: one JSON line per record on stderr, at or above `level`
 * (from WAYPOINT_LOG_LEVEL, default 'warn' so a library stays quiet unless something needs attention).
 */
export class JsonLogger implements Logger {
  private readonly min: number;

  constructor(level: LogLevel = (process.env.WAYPOINT_LOG_LEVEL as LogLevel | undefined) ?? 'warn') {
    const index = LEVELS.indexOf(level);
    this.min = index === -1 ? LEVELS.indexOf('warn') : index;
  }

  debug(message: string, fields?: LogFields): void {
    this.write(0, message, fields);
  }
  info(message: string, fields?: LogFields): void {
    this.write(1, message, fields);
  }
  warn(message: string, fields?: LogFields): void {
    this.write(2, message, fields);
  }
  error(message: string, fields?: LogFields): void {
    this.write(3, message, fields);
  }

  private write(level: number, message: string, fields?: LogFields): void {
    if (level < this.min) return;
    process.stderr.write(JSON.stringify({ time: new Date().toISOString(), level: LEVELS[level], msg: message, ...fields }) + '\n');
  }
}

/**
 * A logger that adds `fields` to every record (a record's own fields win). The runtime gives each run
 * one with `runId` and `pipeline`, and each step attempt one with `agent`, `step`, `sequence` and
 * `attempt` too, so every record can be tied to where it happened; `ctx.logger` is the step's.
 *
 * @example
 * const log = childLogger(logger, { runId, pipeline }); log.info('lease acquired', { epoch });
 */
export function childLogger(parent: Logger, fields: LogFields): Logger {
  const merge = (own?: LogFields): LogFields => (own ? { ...fields, ...own } : fields);
  return {
    debug: (message, own) => parent.debug(message, merge(own)),
    info: (message, own) => parent.info(message, merge(own)),
    warn: (message, own) => parent.warn(message, merge(own)),
    error: (message, own) => parent.error(message, merge(own)),
  };
}
