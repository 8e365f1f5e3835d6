#!/usr/bin/env node
/**
 * The `waypoint` command (package.json "bin"). See `waypoint-durable --help`, and src/cli/exit-codes.ts for
 * what each exit code means.
 *
 *   waypoint-durable --store sqlite:./.waypoint/waypoint.db runs show q3-aapl
 */
import 'reflect-metadata';
import { processIo } from './output';
import { runCli } from './program';

runCli(process.argv.slice(2), processIo()).then(
  (code) => {
    // Exit explicitly: a store client that keeps reconnecting (or an unref'd pool) must not keep an
    // operator's shell waiting. Stdout is flushed first.
    process.stdout.write('', () => process.exit(code));
  },
  (error: unknown) => {
    process.stderr.write(`waypoint: ${error instanceof Error ? error.message : String(error)}\n`);
    process.exit(1);
  },
);
