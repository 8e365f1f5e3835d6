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
