// Type-checks extracted code blocks with the repository's TypeScript in one compiler run. TypeScript 7
// (the native compiler) has no JavaScript API, so this writes a throwaway project and runs its `tsc` in a
// child process, then maps each diagnostic back to the markdown file and line.
//
// The project sits under dist/ (the build output, ignored by git) so that a block's `import ... from
// 'waypoint-durable/sqlite'` resolves the way it does for a user: by the package's own `exports` map
// (self-reference, the nearest package.json being the repository's) to the built dist/src/**/*.d.ts, and
// third-party imports (inversify, class-validator, ai, @langchain/langgraph, pino) to node_modules.
// Each block is its own `.mts` file: an ES module, so the top-level `await` the pages use is allowed
// (`.cts`, CommonJS, for a block with a `commonjs` directive).
import { execFile } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { promisify } from 'node:util';
import type { CodeBlock } from './markdown-blocks';

export const REPO_ROOT = resolve(__dirname, '..', '..', '..');

export interface BlockDiagnostic {
  /** `README.md:72:5`, or the generated file's name when the line came from no markdown line. */
  where: string;
  code: string;
  message: string;
}

const COMPILER_OPTIONS = {
  target: 'ES2022',
  module: 'node20',
  moduleResolution: 'node16',
  lib: ['ES2022'],
  types: ['node'],
  strict: true,
  experimentalDecorators: true,
  emitDecoratorMetadata: true,
  useDefineForClassFields: false,
  noEmit: true,
  skipLibCheck: true,
  esModuleInterop: true,
};

/** Compiles every block not opted out, each as its own module; returns the diagnostics, mapped. */
export async function typecheckBlocks(blocks: CodeBlock[]): Promise<BlockDiagnostic[]> {
  mkdirSync(join(REPO_ROOT, 'dist'), { recursive: true });
  const dir = mkdtempSync(join(REPO_ROOT, 'dist', 'docs-blocks-'));
  try {
    const byFile = new Map<string, CodeBlock>();
    const compiled = blocks.filter((b) => b.optOut === undefined);
    compiled.forEach((block, n) => {
      const sub = `block-${String(n + 1).padStart(2, '0')}`;
      mkdirSync(join(dir, sub));
      const name = block.commonjs === undefined ? 'block.mts' : 'block.cts';
      writeFileSync(join(dir, sub, name), block.text);
      byFile.set(`${sub}/${name}`, block);
      for (const extra of block.files) {
        writeFileSync(join(dir, sub, extra.name), extra.text + '\n');
        byFile.set(`${sub}/${extra.name}`, { ...block, origins: extra.text.split('\n').map((_, k) => extra.firstLine + k) });
      }
    });
    const tsconfig = { compilerOptions: COMPILER_OPTIONS, files: [...byFile.keys()] };
    writeFileSync(join(dir, 'tsconfig.json'), JSON.stringify(tsconfig, null, 2));
    if (byFile.size === 0) return [];
    return parseDiagnostics(await runTsc(dir), byFile);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

async function runTsc(dir: string): Promise<string> {
  const tsc = join(REPO_ROOT, 'node_modules', 'typescript', 'bin', 'tsc');
  try {
    const { stdout } = await promisify(execFile)(process.execPath, [tsc, '-p', 'tsconfig.json', '--pretty', 'false'], { cwd: dir, maxBuffer: 16 << 20 });
    return stdout;
  } catch (error) {
    // tsc exits non-zero when it reports diagnostics: those are the answer, not a failure to run it.
    const failed = error as { stdout?: string; stderr?: string; code?: unknown };
    if (typeof failed.stdout === 'string' && failed.stdout.trim() !== '') return failed.stdout;
    throw new Error(`tsc did not run (exit ${String(failed.code)}): ${failed.stderr ?? String(error)}`);
  }
}

const LOCATED = /^(.+?)\((\d+),(\d+)\): error (TS\d+): (.*)$/;
const UNLOCATED = /^error (TS\d+): (.*)$/;

/** Turns tsc's `file(line,col): error TSn: text` lines (and their indented follow-ups) into mapped diagnostics. */
export function parseDiagnostics(output: string, byFile: Map<string, CodeBlock>): BlockDiagnostic[] {
  const found: BlockDiagnostic[] = [];
  for (const line of output.split(/\r?\n/)) {
    const located = LOCATED.exec(line);
    const unlocated = UNLOCATED.exec(line);
    if (located) {
      const [, file, row, col, code, message] = located;
      found.push({ where: mapLocation(file.replace(/\\/g, '/'), Number(row), Number(col), byFile), code: code, message: message });
    } else if (unlocated) {
      found.push({ where: 'tsconfig', code: unlocated[1], message: unlocated[2] });
    } else if (/^\s+\S/.test(line) && found.length > 0) {
      found[found.length - 1].message += `\n${line}`;
    } else if (line.trim() !== '' && !/^Found \d+ error/.test(line)) {
      // Anything else tsc says is unexpected: keep it rather than let a failure read as a pass.
      found.push({ where: 'tsc', code: 'output', message: line });
    }
  }
  return found;
}

function mapLocation(file: string, row: number, col: number, byFile: Map<string, CodeBlock>): string {
  const block = byFile.get(file);
  const origin = block?.origins[row - 1];
  if (!block || origin === undefined) return `${file}(${row},${col}) [generated; ${block ? `block at ${block.source}:${block.fenceLine}` : 'no block'}]`;
  return `${block.source}:${origin}:${col}`;
}
