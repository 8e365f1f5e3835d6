import type { LogFields, Logger, RecordLevel } from '../../contract/logger';

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
