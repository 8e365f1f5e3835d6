// Pulls the TypeScript code blocks out of a markdown page, with the HTML-comment directives written
// just above each one, and turns each block into the text of one module file plus a map from that file's
// lines back to the markdown's lines (so a compiler diagnostic can name README.md:72, not block-3.mts:9).
//
// Directives (HTML comments, so GitHub shows none of them), directly above the fence, blank lines allowed:
//   <!-- prelude:            code put before the block: the imports and `declare const`s a fragment
//   ...                      takes from the surrounding prose. A line that is exactly `/* block */`
//   -->                      puts the block there instead, so a prelude can wrap a method in a class.
//   <!-- file my-store.ts:   a module written beside the block, for a relative import in it.
//   ...
//   -->
//   <!-- not-compiled: why -->   the block is left out and counted as an opt-out; the reason is required.
//   <!-- commonjs: why -->       the block is compiled as a CommonJS file (.cts) instead of an ES module
//                                (.mts), for code that only type-checks there; the reason is required.
// Only ```ts and ```typescript fences are compiled; json, bash, plain ``` and the rest are prose.

/** Where a generated line came from: a markdown line, or nowhere (a line the generator added). */
export type LineOrigin = number | undefined;

export interface ExtraFile {
  name: string;
  text: string;
  /** The markdown line of the file's first line. */
  firstLine: number;
}

export interface CodeBlock {
  /** The markdown file, as given. */
  source: string;
  /** The markdown line of the opening fence (1-based). */
  fenceLine: number;
  /** The module text to compile: prelude and block, ending in `export {}` so it is always a module. */
  text: string;
  /** origins[i] is the markdown line of the module's line i + 1. */
  origins: LineOrigin[];
  files: ExtraFile[];
  /** Set when a `not-compiled` directive opts the block out. */
  optOut?: string;
  /** Set when a `commonjs` directive asks for a CommonJS file: the reason. */
  commonjs?: string;
}

interface Directive {
  kind: 'prelude' | 'file' | 'not-compiled' | 'commonjs';
  arg: string;
  /** The directive's body lines, with the markdown line of the first. */
  body: string[];
  firstLine: number;
}

const FENCE = /^(\s*)(`{3,}|~{3,})\s*([\w+-]*)/;
const COMPILED = new Set(['ts', 'typescript']);
const HEAD = /^<!--\s*(prelude|file|not-compiled|commonjs)\b\s*([^:]*?)\s*:(.*)$/;

/** Every compiled-language block of `markdown`, in order, with its directives applied. */
export function extractBlocks(source: string, markdown: string): CodeBlock[] {
  const lines = markdown.split(/\r?\n/);
  const blocks: CodeBlock[] = [];
  let pending: Directive[] = [];
  for (let i = 0; i < lines.length; i++) {
    const fence = FENCE.exec(lines[i]);
    if (fence) {
      const close = findClose(lines, i, fence[2]);
      if (COMPILED.has(fence[3].toLowerCase())) {
        blocks.push(makeBlock(source, i + 1, lines.slice(i + 1, close), pending));
      } else if (pending.length > 0) {
        throw new Error(`${source}:${i + 1}: a compile directive stands above a '${fence[3] || 'plain'}' block, which is never compiled`);
      }
      pending = [];
      i = close;
      continue;
    }
    const head = HEAD.exec(lines[i].trim());
    if (head) {
      const directive = readDirective(source, lines, i, head);
      pending.push(directive.directive);
      i = directive.end;
    } else if (lines[i].trim() !== '' && pending.length > 0) {
      throw new Error(`${source}:${i + 1}: a compile directive must stand directly above a code block`);
    }
  }
  if (pending.length > 0) throw new Error(`${source}: a compile directive at the end of the page has no block below it`);
  return blocks;
}

function findClose(lines: string[], open: number, marker: string): number {
  for (let j = open + 1; j < lines.length; j++) {
    if (lines[j].trim().startsWith(marker) && lines[j].trim().replace(/[`~]/g, '') === '') return j;
  }
  throw new Error(`unclosed code fence opened at line ${open + 1}`);
}

function readDirective(source: string, lines: string[], at: number, head: RegExpExecArray): { directive: Directive; end: number } {
  const kind = head[1] as Directive['kind'];
  const arg = head[2];
  const rest = head[3];
  // One-line form: `<!-- not-compiled: reason -->`.
  if (rest.trimEnd().endsWith('-->')) {
    const text = rest.trimEnd().slice(0, -3).trim();
    const reasoned = kind === 'not-compiled' || kind === 'commonjs';
    if (reasoned && text === '') throw new Error(`${source}:${at + 1}: ${kind} needs a reason`);
    return { directive: { kind, arg: reasoned ? text : arg, body: text ? [text] : [], firstLine: at + 1 }, end: at };
  }
  if (rest.trim() !== '') throw new Error(`${source}:${at + 1}: a multi-line ${kind} starts its code on the next line`);
  for (let j = at + 1; j < lines.length; j++) {
    if (lines[j].trim() === '-->') {
      if (kind === 'file' && !/^[\w.-]+\.(ts|mts|d\.ts)$/.test(arg)) throw new Error(`${source}:${at + 1}: file needs a name such as my-store.ts`);
      return { directive: { kind, arg, body: lines.slice(at + 1, j), firstLine: at + 2 }, end: j };
    }
  }
  throw new Error(`${source}:${at + 1}: ${kind} is not closed by a line '-->'`);
}

function makeBlock(source: string, fenceLine: number, body: string[], directives: Directive[]): CodeBlock {
  const block: CodeBlock = { source, fenceLine, text: '', origins: [], files: [] };
  const optOut = directives.find((d) => d.kind === 'not-compiled');
  if (optOut) {
    if (directives.length > 1) throw new Error(`${source}:${fenceLine}: a not-compiled block takes no other directive`);
    return { ...block, optOut: optOut.arg };
  }
  const preludes = directives.filter((d) => d.kind === 'prelude');
  if (preludes.length > 1) throw new Error(`${source}:${fenceLine}: one prelude per block`);
  const out: string[] = [];
  const origins: LineOrigin[] = [];
  const emit = (text: string, origin: LineOrigin) => (out.push(text), origins.push(origin));
  const emitLines = (from: number, to: number) => body.slice(from, to).forEach((line, k) => emit(line, fenceLine + 1 + from + k));
  const prelude = preludes[0]?.body ?? [];
  // A wrapping prelude (a class around a method) gets the block's leading imports first: imports are
  // hoisted in ES modules anyway, and inside a class body they would not parse.
  const wraps = prelude.some((line) => line.trim() === '/* block */');
  const hoisted = wraps ? leadingImports(body) : 0;
  emitLines(0, hoisted);
  const emitBlock = () => emitLines(hoisted, body.length);
  let placed = false;
  for (const [k, line] of prelude.entries()) {
    if (line.trim() === '/* block */' && !placed) {
      emitBlock();
      placed = true;
    } else {
      emit(line, preludes[0].firstLine + k);
    }
  }
  if (!placed) emitBlock();
  emit('export {};', undefined);
  block.commonjs = directives.find((d) => d.kind === 'commonjs')?.arg;
  block.files = directives.filter((d) => d.kind === 'file').map((d) => ({ name: d.arg, text: d.body.join('\n'), firstLine: d.firstLine }));
  return { ...block, text: out.join('\n') + '\n', origins };
}

/** How many lines at the start of `body` are imports (single-line) or blank. */
function leadingImports(body: string[]): number {
  let n = 0;
  while (n < body.length && (body[n].trim() === '' || /^import\s.*;\s*$/.test(body[n]))) n++;
  return n;
}
