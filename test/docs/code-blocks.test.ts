// Every ```ts / ```typescript block of README.md and docs/*.md compiles against the package as a user
// imports it (`waypoint-durable`, `waypoint-durable/sqlite`, ... through the package's exports map, to the
// built dist/src/**/*.d.ts): strict, with experimentalDecorators and emitDecoratorMetadata. One tsc run
// for all blocks, each its own module; a diagnostic fails the test with the markdown file and line.
//
// Blocks tagged json, bash, sh, text or plain ``` are not compiled: they are commands and data, not code
// against the package. A fragment that uses names from the prose around it (`waypoint`, `runId`,
// `FinancialAnalysis`) declares them in a hidden `<!-- prelude: ... -->` comment above the block; a
// block that cannot compile at all says why in `<!-- not-compiled: reason -->`. The directives are
// described in test/docs/markdown-blocks.ts. Requires `npm run build` first (the test reads dist/).
import { strict as assert } from 'node:assert';
import { existsSync, readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { extractBlocks, type CodeBlock } from './markdown-blocks';
import { REPO_ROOT, typecheckBlocks } from './typecheck-blocks';

function pages(): string[] {
  const docs = readdirSync(join(REPO_ROOT, 'docs'))
    .filter((name) => name.endsWith('.md'))
    .sort()
    .map((name) => `docs/${name}`);
  return ['README.md', ...docs];
}

function blocksOf(page: string): CodeBlock[] {
  return extractBlocks(page, readFileSync(join(REPO_ROOT, page), 'utf8'));
}

describe('code blocks of README.md and docs/*.md', () => {
  it('compile against the built package', async () => {
    assert.ok(existsSync(join(REPO_ROOT, 'dist', 'src', 'index.d.ts')), 'dist/src/index.d.ts is missing: run npm run build first');
    const blocks = pages().flatMap(blocksOf);
    const optedOut = blocks.filter((b) => b.optOut !== undefined);
    const diagnostics = await typecheckBlocks(blocks);
    const summary = `${blocks.length - optedOut.length} blocks compiled, ${optedOut.length} opted out`;
    const notes = [
      ...optedOut.map((b) => `\n  not compiled: ${b.source}:${b.fenceLine} (${b.optOut})`),
      ...blocks.filter((b) => b.commonjs !== undefined).map((b) => `\n  as CommonJS: ${b.source}:${b.fenceLine} (${b.commonjs})`),
    ];
    console.log(summary + notes.join(''));
    assert.deepEqual(
      diagnostics.map((d) => `${d.where}: ${d.code}: ${d.message}`),
      [],
      `${summary}; the blocks above do not compile`,
    );
    // The pages hold blocks: a parser that found none would pass everything.
    assert.ok(blocks.length - optedOut.length >= 10, summary);
  });
});

describe('the block checker', () => {
  it('reports a broken block at its markdown file and line, and a broken prelude at the prelude line', async () => {
    const page = [
      '# A page',
      '',
      '<!-- prelude:',
      "import { Waypoint } from 'waypoint-durable';",
      'declare const waypoint: Waypoint;',
      'const typo: number = "prelude";',
      '-->',
      '```ts',
      "await waypoint.resume('q3-aapl');",
      "await waypoint.resumeRun('q3-aapl');",
      '```',
      '',
      '```json',
      '{ "not": compiled }',
      '```',
    ].join('\n');
    const blocks = extractBlocks('docs/page.md', page);
    assert.equal(blocks.length, 1);
    const found = await typecheckBlocks(blocks);
    assert.deepEqual(
      found.map((d) => [d.where, d.code]),
      [
        ['docs/page.md:6:7', 'TS2322'],
        ['docs/page.md:10:16', 'TS2551'], // resumeRun: did you mean 'resume'?
      ],
    );
    assert.match(found[1].message, /resumeRun/);
  });

  it('puts the block where the prelude says /* block */, writes a file directive beside it, and counts opt-outs', async () => {
    const page = [
      '<!-- file my-clock.ts:',
      'export const now = (): number => 1;',
      '-->',
      '<!-- prelude:',
      "import { now } from './my-clock.js';",
      'class Holder {',
      '/* block */',
      '}',
      '-->',
      '```typescript',
      'tick(): string { return now(); }',
      '```',
      '<!-- not-compiled: shows a shell session -->',
      '```ts',
      'this is not TypeScript',
      '```',
    ].join('\n');
    const blocks = extractBlocks('README.md', page);
    assert.deepEqual(
      blocks.map((b) => b.optOut),
      [undefined, 'shows a shell session'],
    );
    assert.deepEqual(blocks[0].origins, [5, 6, 11, 8, undefined]);
    const found = await typecheckBlocks(blocks);
    assert.deepEqual(
      found.map((d) => [d.where, d.code]),
      [['README.md:11:18', 'TS2322']],
    );
  });

  it('refuses a directive with no block under it, a reason-less opt-out, and a directive above a json block', () => {
    assert.throws(() => extractBlocks('a.md', '<!-- prelude:\nlet a = 1;\n-->\nSome prose.\n```ts\nx\n```'), /directly above a code block/);
    assert.throws(() => extractBlocks('a.md', '<!-- not-compiled: -->\n```ts\nx\n```'), /needs a reason/);
    assert.throws(() => extractBlocks('a.md', '<!-- commonjs: -->\n```ts\nx\n```'), /commonjs needs a reason/);
    assert.throws(() => extractBlocks('a.md', '<!-- not-compiled: data -->\n```json\n{}\n```'), /never compiled/);
    assert.throws(() => extractBlocks('a.md', '<!-- prelude:\nlet a = 1;\n```ts\nx\n```'), /not closed/);
  });
});
