import type { LogFields, Logger } from '../contract/logger';
import type { CliIo } from './output';

/**
 * The runtime's logger while the CLI drives a run (unless the user's module binds its own): one readable
 * line per record on stderr, `waypoint: warn: lease lost; stopping executor (runId=q3-aapl epoch=3)`.
 * Warnings and errors always; info and debug with `--verbose`.
 *
 * @example
 * container.bind(TOKENS.Logger).toConstantValue(new CliLogger(io, verbose));
 */
export class CliLogger implements Logger {
  constructor(
    private readonly io: CliIo,
    private readonly verbose: boolean,
  ) {}

  debug(message: string, fields?: LogFields): void {
    if (this.verbose) this.write('debug', message, fields);
  }
  info(message: string, fields?: LogFields): void {
    if (this.verbose) this.write('info', message, fields);
  }
  warn(message: string, fields?: LogFields): void {
    this.write('warn', message, fields);
  }
  error(message: string, fields?: LogFields): void {
    this.write('error', message, fields);
  }

  private write(level: string, message: string, fields: LogFields = {}): void {
    const pairs = Object.entries(fields)
      .filter(([, value]) => value !== undefined)
      .map(([key, value]) => `${key}=${typeof value === 'string' ? value : JSON.stringify(value)}`);
    this.io.err(`waypoint: ${level}: ${message}${pairs.length ? ` (${pairs.join(' ')})` : ''}\n`);
  }
}
