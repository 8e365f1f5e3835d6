/** The cells of a `| a | b | c |` line (callers check that no cell of theirs holds a pipe). */
function cells(line: string): string[] {
  return line
    .trim()
    .replace(/^\|/, '')
    .replace(/\|$/, '')
    .split('|')
    .map((cell) => cell.trim());
}

/**
 * The body rows, as cells, of the one table in `markdown` whose header row is `header`; throws when the
 * page (named `page` in the message) holds no such table, more than one, or one without its `| --- |` line.
 *
 * @example
 * tableOf(readFileSync('docs/errors.md', 'utf8'), ['Code', 'What it means and what to do'], 'docs/errors.md');
 */
export function tableOf(markdown: string, header: readonly string[], page: string): string[][] {
  const lines = markdown.split(/\r?\n/);
  const starts = lines.flatMap((line, i) => (line.trim().startsWith('|') && cells(line).join('|') === header.join('|') ? [i] : []));
  if (starts.length !== 1) throw new Error(`${page} has ${starts.length} tables headed ${header.join(' | ')}, not one`);
  const rows: string[][] = [];
  for (let i = starts[0] + 1; i < lines.length && lines[i].trim().startsWith('|'); i++) rows.push(cells(lines[i]));
  const [rule, ...body] = rows;
  if (!rule || !rule.every((cell) => /^:?-{3,}:?$/.test(cell))) throw new Error(`${page}: the table headed ${header.join(' | ')} has no | --- | line under its header`);
  return body;
}
