// docs/errors.md shows the table that types WaypointError.code (src/contract/error-codes.ts): same codes,
// same order, same texts. Change the table in src, then paste the table this test prints on failure into the page.
import { strict as assert } from 'node:assert';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { WAYPOINT_ERROR_CODES } from '../../src';
import { tableOf } from './markdown-table';
import { REPO_ROOT } from './typecheck-blocks';

const PAGE = 'docs/errors.md';
const HEADER = ['Code', 'What it means and what to do'];

/** The body rows of the one table headed HEADER in `markdown`; throws when there is not exactly one. */
export function codeTableOf(markdown: string): string[][] {
  return tableOf(markdown, HEADER, PAGE);
}

/** The rows the page must hold, as cells: the code in backticks, then its text. */
function expectedRows(): string[][] {
  return Object.entries(WAYPOINT_ERROR_CODES).map(([code, text]) => [`\`${code}\``, text]);
}

/** The table as the page should show it. */
function tableMarkdown(): string {
  return [`| ${HEADER.join(' | ')} |`, '| --- | --- |', ...expectedRows().map((row) => `| ${row.join(' | ')} |`)].join('\n');
}

describe(`the table of error codes in ${PAGE}`, () => {
  it('lists exactly the codes of WAYPOINT_ERROR_CODES, in its order, with the same texts', () => {
    const documented = codeTableOf(readFileSync(join(REPO_ROOT, PAGE), 'utf8'));
    assert.deepEqual(documented, expectedRows(), `${PAGE} differs from src/contract/error-codes.ts; its table should read:\n\n${tableMarkdown()}\n`);
  });

  it('every text is one sentence that can sit in a markdown cell', () => {
    for (const [code, text] of Object.entries(WAYPOINT_ERROR_CODES)) {
      assert.match(code, /^[A-Z][A-Z0-9]*(_[A-Z0-9]+)*$/, `${code} is not an upper-case code`);
      assert.ok(!/[|\n]/.test(text), `${code}: its text holds a pipe or a line break`);
      assert.match(text, /^[^\s].*[^.]\.$/, `${code}: its text is not a sentence ending in one period`);
      assert.ok(!/\.\s+[A-Z]/.test(text.replace(/\b(e\.g|i\.e)\./g, '')), `${code}: its text holds more than one sentence`);
    }
  });

  it('the parser refuses a page whose table lacks a code, and one with two tables', () => {
    const one = `# E\n\n| ${HEADER.join(' | ')} |\n| --- | --- |\n| \`RUN_LOCKED\` | x. |\n`;
    assert.deepEqual(codeTableOf(one), [['`RUN_LOCKED`', 'x.']]);
    assert.notDeepEqual(codeTableOf(one), expectedRows());
    assert.throws(() => codeTableOf(one + '\n' + one), /2 tables/);
    assert.throws(() => codeTableOf('# E\n'), /0 tables/);
  });
});
