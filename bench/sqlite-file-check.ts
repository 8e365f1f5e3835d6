import 'reflect-metadata';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { TypeOrmCheckpointStore } from '../src/index';
import { StoreAppendFloor } from './store-floor';

/**
 * What the SQLite store's file-identity check (one stat of the database path per step append) costs:
 * each call of `checkFile` timed inside `store.appendStep` loops, and the same loops with the check
 * replaced by a no-op, alternated. `synchronous=NORMAL` (no fsync per commit) so the append's own CPU,
 * not the disk, is what the check is set against. Prints; asserts nothing. The check is reached from the
 * opened store (its SQLite operations' file identity, a private field): no entry point exports it.
 *
 * @example
 * npm run build && node dist/bench/sqlite-file-check.js
 */
async function main(): Promise<void> {
  const dir = mkdtempSync(path.join(tmpdir(), 'waypoint-file-check-'));
  const store = new TypeOrmCheckpointStore({ type: 'sqlite', path: path.join(dir, 'bench.db'), synchronous: 'NORMAL' });
  await store.init();
  const floor = new StoreAppendFloor(store);
  const proto = fileIdentityOf(store);
  const check = proto.checkFile;
  const samples: number[] = [];
  const timed = function (this: unknown): void {
    const start = process.hrtime.bigint();
    check.call(this);
    samples.push(Number(process.hrtime.bigint() - start) / 1000);
  };
  const perAppend = { on: [] as number[], off: [] as number[] };
  try {
    await floor.batch(2000, 'x'.repeat(200)); // warm-up
    proto.checkFile = timed;
    for (let round = 0; round < 4; round++) await floor.batch(2000, 'x'.repeat(200));
    // The A/B: the check as shipped against a no-op, alternated so drift on the machine hits both.
    for (let round = 0; round < 8; round++) {
      for (const mode of round % 2 === 0 ? (['on', 'off'] as const) : (['off', 'on'] as const)) {
        proto.checkFile = mode === 'on' ? check : () => undefined;
        perAppend[mode].push(await floor.batch(2000, 'x'.repeat(200)));
      }
    }
  } finally {
    proto.checkFile = check;
    await store.close();
    rmSync(dir, { recursive: true, force: true });
  }
  const sorted = samples.sort((a, b) => a - b);
  const at = (q: number) => sorted[Math.min(sorted.length - 1, Math.floor(sorted.length * q))].toFixed(2);
  const median = (xs: number[]) => xs.sort((a, b) => a - b)[xs.length >> 1];
  console.log(`checkFile per append: median ${at(0.5)} us, p90 ${at(0.9)} us, p99 ${at(0.99)} us (${sorted.length} calls)`);
  console.log(`appendStep (synchronous=NORMAL), median of 8 rounds: ${median(perAppend.on).toFixed(1)} us with the check, ${median(perAppend.off).toFixed(1)} us without`);
}

/** The prototype holding `checkFile` of the store's file identity (`store.ops.identity`), so every append's check can be swapped. */
function fileIdentityOf(store: TypeOrmCheckpointStore): { checkFile: (this: unknown) => void } {
  const identity = (store as unknown as { ops?: { identity?: object } }).ops?.identity;
  const proto = identity ? (Object.getPrototypeOf(identity) as { checkFile?: unknown }) : null;
  if (!proto || typeof proto.checkFile !== 'function')
    throw new Error('the SQLite store no longer keeps its file identity at ops.identity.checkFile: update bench/sqlite-file-check.ts');
  return proto as { checkFile: (this: unknown) => void };
}

void main();
