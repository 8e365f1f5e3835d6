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
  /**
   * Optional: false when records of `level` are dropped, so callers can skip building them (the
   * runtime logs a debug record per step). Absent means every level may be written.
   */
  isLevelEnabled?(level: RecordLevel): boolean;
}

const LEVELS = ['debug', 'info', 'warn', 'error', 'silent'] as const;
export type LogLevel = (typeof LEVELS)[number];
/** The levels a record can have. */
export type RecordLevel = Exclude<LogLevel, 'silent'>;

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
  isLevelEnabled(level: RecordLevel): boolean {
    return LEVELS.indexOf(level) >= this.min;
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
  return new ChildLogger(parent, fields);
}

/** See {@link childLogger}. A record of a level the parent drops costs one check: nothing is merged. */
class ChildLogger implements Logger {
  constructor(
    private readonly parent: Logger,
    private readonly fields: LogFields,
  ) {}

  debug(message: string, own?: LogFields): void {
    if (this.isLevelEnabled('debug')) this.parent.debug(message, this.merge(own));
  }
  info(message: string, own?: LogFields): void {
    if (this.isLevelEnabled('info')) this.parent.info(message, this.merge(own));
  }
  warn(message: string, own?: LogFields): void {
    if (this.isLevelEnabled('warn')) this.parent.warn(message, this.merge(own));
  }
  error(message: string, own?: LogFields): void {
    if (this.isLevelEnabled('error')) this.parent.error(message, this.merge(own));
  }
  isLevelEnabled(level: RecordLevel): boolean {
    return this.parent.isLevelEnabled?.(level) ?? true;
  }

  private merge(own: LogFields | undefined): LogFields {
    return own ? { ...this.fields, ...own } : this.fields;
  }
}
