/** Where the command writes: results on stdout, progress and errors on stderr. */
export interface CliIo {
  out(text: string): void;
  err(text: string): void;
  /** stderr is a terminal: progress redraws one line in place. */
  readonly errIsTTY: boolean;
}

/** The real process streams. */
export function processIo(): CliIo {
  return {
    out: (text) => void process.stdout.write(text),
    err: (text) => void process.stderr.write(text),
    errIsTTY: process.stderr.isTTY === true,
  };
}

/** One JSON document on stdout (dates as ISO strings), for `--json`. */
export function printJson(io: CliIo, value: unknown): void {
  io.out(JSON.stringify(value, null, 2) + '\n');
}

/**
 * A plain-text table: columns padded to their widest cell, numbers right-aligned where `right` says so.
 *
 * @example
 * table(['RUN', 'SEQ'], [['q3-aapl', '11']], [false, true])
 */
export function table(headers: string[], rows: string[][], right: boolean[] = []): string {
  const widths = headers.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? '').length)));
  const line = (cells: string[]) =>
    cells
      .map((cell, i) => (right[i] ? cell.padStart(widths[i]) : i === cells.length - 1 ? cell : cell.padEnd(widths[i])))
      .join('  ')
      .trimEnd();
  return [line(headers), ...rows.map(line)].join('\n') + '\n';
}

/** `text` cut to `max` characters with an ellipsis. */
export function clip(text: string, max: number): string {
  return text.length <= max ? text : `${text.slice(0, Math.max(0, max - 1))}…`;
}
