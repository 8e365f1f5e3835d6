// The table of values in docs/guarantees.md is the table the values suite round-trips on every backend
// (test/core/value-table.ts): same rows, same order, same texts. Change the data table, then paste the
// table this test prints on failure into the page.
import { strict as assert } from 'node:assert';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { tableMarkdown, VALUE_TABLE } from '../core/value-table';
import { tableOf } from './markdown-table';
import { REPO_ROOT } from './typecheck-blocks';

const PAGE = 'docs/guarantees.md';
const HEADER = ['Value', 'Stored and returned as', 'Note'];

/** The body rows of the one table headed HEADER in `markdown`; throws when there is not exactly one. */
export function valuesTableOf(markdown: string): string[][] {
  return tableOf(markdown, HEADER, PAGE);
}

describe(`the table of values in ${PAGE}`, () => {
  it('lists exactly the rows the values suite round-trips, with the same texts', () => {
    const documented = valuesTableOf(readFileSync(join(REPO_ROOT, PAGE), 'utf8'));
    const tested = VALUE_TABLE.map((row) => [row.value, row.back, row.note]);
    assert.deepEqual(documented, tested, `${PAGE} differs from test/core/value-table.ts; its table should read:\n\n${tableMarkdown()}\n`);
  });

  it('the data table can be written as markdown: no pipe or line break in a cell, every row a case', () => {
    for (const row of VALUE_TABLE) {
      for (const text of [row.value, row.back, row.note]) assert.ok(!/[|\n]/.test(text), `${JSON.stringify(text)} holds a pipe or a line break`);
      assert.ok(row.value.length > 0 && row.back.length > 0, 'a row names its value and what comes back');
      assert.ok(row.cases().length > 0, `${row.value} has no case`);
      assert.equal(row.back.startsWith('refused'), row.refused !== undefined, `${row.value}: "refused" in the docs exactly when the row is refused`);
    }
  });

  it('the parser reads a table out of a page, and refuses a page with none', () => {
    const page = [
      '# T',
      '',
      '   | Value | Stored and returned as | Note |',
      '   | --- | --- | --- |',
      '   | `1` | the same |  |',
      '   | `x` | dropped | n |',
      '',
      'after | pipe',
    ].join('\n');
    assert.deepEqual(valuesTableOf(page), [
      ['`1`', 'the same', ''],
      ['`x`', 'dropped', 'n'],
    ]);
    assert.throws(() => valuesTableOf('# nothing here'), /0 tables/);
  });
});
