import { usageError } from './exit-codes';

const UNITS: Record<string, number> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000, w: 604_800_000 };

/**
 * Parses a duration: a number with a unit (`500ms`, `30s`, `15m`, `2h`, `7d`, `1w`), or several
 * (`1h30m`). A bare number is refused: its unit would be a guess.
 *
 * @example
 * parseDuration('1h30m') // 5_400_000
 */
export function parseDuration(text: string, option = 'duration'): number {
  const trimmed = text.trim();
  const parts = [...trimmed.matchAll(/(\d+(?:\.\d+)?)(ms|s|m|h|d|w)/g)];
  if (trimmed === '' || parts.map((p) => p[0]).join('') !== trimmed) {
    throw usageError(`${option} '${text}' is not a duration: use a number and a unit, e.g. 30s, 15m, 2h, 7d or 1h30m.`);
  }
  return parts.reduce((sum, [, value, unit]) => sum + Number(value) * UNITS[unit], 0);
}

/**
 * Parses `--since`: a duration back from `now` (`2h`) or an ISO date / date-time (`2026-01-18`,
 * `2026-01-18T02:00:00Z`).
 *
 * @example
 * parseSince('2h', new Date('2026-01-18T12:00:00Z')).toISOString() // '2026-01-18T10:00:00.000Z'
 */
export function parseSince(text: string, now = new Date()): Date {
  if (/^\d{4}-\d{2}-\d{2}/.test(text.trim())) {
    const date = new Date(text);
    if (Number.isNaN(date.getTime()))
      throw usageError(`--since '${text}' is not a valid date: give an ISO date or date-time (2026-01-18, 2026-01-18T02:00:00Z) or a duration back from now (2h).`);
    return date;
  }
  return new Date(now.getTime() - parseDuration(text, '--since'));
}

/** A positive integer option value. */
export function parseCount(text: string, option: string, min = 1): number {
  const value = Number(text);
  if (!/^\d+$/.test(text.trim()) || !Number.isSafeInteger(value) || value < min) throw usageError(`${option} must be an integer >= ${min}, got '${text}'.`);
  return value;
}

/**
 * A duration for people: `850 ms`, `4.2 s`, `3 min 5 s`, `2 h 10 min`, `3 d 4 h`.
 *
 * @example
 * formatDuration(185_000) // '3 min 5 s'
 */
export function formatDuration(ms: number): string {
  const abs = Math.abs(ms);
  const sign = ms < 0 ? '-' : '';
  if (abs < 1000) return `${sign}${Math.round(abs)} ms`;
  if (abs < 60_000) return `${sign}${(abs / 1000).toFixed(abs < 10_000 ? 2 : 1)} s`;
  const pair = (big: number, bigUnit: string, small: number, smallUnit: string) => {
    const whole = Math.floor(abs / big);
    const rest = Math.floor((abs - whole * big) / small);
    return `${sign}${whole} ${bigUnit}${rest ? ` ${rest} ${smallUnit}` : ''}`;
  };
  if (abs < 3_600_000) return pair(60_000, 'min', 1000, 's');
  if (abs < 86_400_000) return pair(3_600_000, 'h', 60_000, 'min');
  return pair(86_400_000, 'd', 3_600_000, 'h');
}

/** `3 min ago` / `in 12 s`, relative to `now`. */
export function formatAge(at: Date, now = new Date()): string {
  const delta = now.getTime() - at.getTime();
  return delta >= 0 ? `${formatDuration(delta)} ago` : `in ${formatDuration(-delta)}`;
}

/** `512 B`, `4.1 KiB`, `2.3 MiB`. */
export function formatBytes(bytes: number): string {
  if (bytes < 1024) return `${bytes} B`;
  if (bytes < 1024 * 1024) return `${(bytes / 1024).toFixed(1)} KiB`;
  return `${(bytes / 1024 / 1024).toFixed(1)} MiB`;
}
