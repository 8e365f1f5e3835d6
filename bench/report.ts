import type { Summary, Verdict } from './stats';

/**
 * The bench's output model: one section per figure group, each a table a person reads plus the raw
 * figures for `--json`. Rendering is separate from measuring so both outputs show the same numbers.
 */
export interface Section {
  id: string;
  title: string;
  /** What was measured and how, in one or two lines. */
  method: string;
  columns: string[];
  rows: string[][];
  /** Lines after the table: verdicts, explanations. */
  notes: string[];
  /** Machine-readable figures (medians, samples, counts) for `--json`. */
  figures: Record<string, unknown>;
}

/**
 * An empty section to fill with rows, notes and figures.
 *
 * @example
 * const s = section('heap', 'Heap during a run', 'heapUsed after gc', ['backend', 'growth']);
 */
export function section(id: string, title: string, method: string, columns: string[]): Section {
  return { id, title, method, columns, rows: [], notes: [], figures: {} };
}

/** µs with a sensible number of digits: `us(412.3)` → '412 µs', `us(2500)` → '2.50 ms'. */
export function us(value: number): string {
  if (!Number.isFinite(value)) return String(value);
  if (value >= 10_000) return `${(value / 1000).toFixed(1)} ms`;
  if (value >= 1000) return `${(value / 1000).toFixed(2)} ms`;
  if (value >= 100) return `${value.toFixed(0)} µs`;
  return `${value.toFixed(1)} µs`;
}

/** "412 µs (398–470)": median with the min–max spread of the repetitions. */
export function usSpread(s: Summary): string {
  return `${us(s.median)} (${us(s.min)}–${us(s.max)})`;
}

/** `ratio(1.234)` → '1.23x'. */
export function ratio(value: number): string {
  return `${value.toFixed(2)}x`;
}

/** "1.31x (1.20–1.44)". */
export function ratioSpread(s: Summary): string {
  return `${ratio(s.median)} (${s.min.toFixed(2)}–${s.max.toFixed(2)})`;
}

/** `bytes(1325)` → '1325 B', `bytes(2_200_000)` → '2.1 MB'. */
export function bytes(value: number): string {
  if (value >= 1024 * 1024) return `${(value / 1024 / 1024).toFixed(1)} MB`;
  if (value >= 10 * 1024) return `${(value / 1024).toFixed(1)} KB`;
  return `${Math.round(value)} B`;
}

/** Integers as they are, others with `digits` decimals: `count(1.005)` → '1.00'. */
export function count(value: number, digits = 2): string {
  return Number.isInteger(value) ? String(value) : value.toFixed(digits);
}

/** "met (≤1.25x)" or "MISSED (≤1.25x) by 9.6%". */
export function verdict(v: Verdict, kind: '≤' | '≥' = '≤'): string {
  const target = `${kind}${v.target}x`;
  return v.met ? `met (${target})` : `MISSED (${target}) by ${(v.missedBy * 100).toFixed(1)}%`;
}

/** Plain-text rendering: aligned columns, a rule under the header, method and notes around. */
export function renderText(sections: readonly Section[], header: string[]): string {
  const out: string[] = [...header, ''];
  sections.forEach((s, i) => {
    out.push(`${i + 1}. ${s.title}`);
    out.push(`   ${s.method}`);
    if (s.rows.length > 0) {
      const widths = s.columns.map((c, col) => Math.max(width(c), ...s.rows.map((r) => width(r[col] ?? ''))));
      const line = (cells: readonly string[]) =>
        '   ' +
        cells
          .map((c, col) => pad(c, widths[col], col))
          .join('  ')
          .trimEnd();
      out.push(line(s.columns));
      out.push('   ' + widths.map((w) => '-'.repeat(w)).join('  '));
      for (const row of s.rows) out.push(line(row));
    }
    for (const note of s.notes) out.push(`   ${note}`);
    out.push('');
  });
  return out.join('\n');
}

// Column widths by code points, so 'µ' and '–' count as one column.
function width(text: string): number {
  return [...text].length;
}

function pad(text: string, to: number, col: number): string {
  const fill = ' '.repeat(Math.max(0, to - width(text)));
  return col === 0 ? text + fill : fill + text;
}
