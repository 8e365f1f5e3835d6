#!/usr/bin/env node
// Runs every compiled test file under dist/test with node's test runner. Node 20's --test takes no
// globs, so the files are listed here. Extra arguments are passed through (e.g. a file filter).
'use strict';
const { spawnSync } = require('node:child_process');
const { readdirSync, statSync } = require('node:fs');
const { join } = require('node:path');

function find(dir) {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) return find(path);
    return name.endsWith('.test.js') ? [path] : [];
  });
}

const filter = process.argv[2];
const files = find(join(__dirname, '..', 'dist', 'test'))
  .filter((f) => !filter || f.includes(filter))
  .sort();
if (files.length === 0) {
  console.error('no test files found under dist/test' + (filter ? ` matching '${filter}'` : ''));
  process.exit(1);
}
// The fleet and fan-out suites start several worker processes, each with its own pools: alone they open up
// to about 60 PostgreSQL connections, so beside another file they could reach the server's 100 ("too many
// clients", seen once in CI as a job failed back to the queue). They run after the rest, one at a time.
const solo = (f) => /[\\/]queue[\\/](fleet|fanout)-[^\\/]*\.test\.js$/.test(f);
const passes = [
  { concurrency: 2, files: files.filter((f) => !solo(f)) },
  { concurrency: 1, files: files.filter(solo) },
];
// --test-force-exit: a file whose tests have all ended exits even with a handle left open (a test that timed
// out leaves its own body's sockets and child processes behind); without it one such file hung the whole run.
let status = 0;
for (const pass of passes) {
  if (pass.files.length === 0) continue;
  const result = spawnSync(process.execPath, ['--test', '--test-force-exit', `--test-concurrency=${pass.concurrency}`, '--test-reporter=spec', ...pass.files], {
    stdio: 'inherit',
  });
  if (result.status !== 0) status = result.status ?? 1;
}
process.exit(status);
