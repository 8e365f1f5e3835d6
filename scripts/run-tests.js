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
const result = spawnSync(process.execPath, ['--test', '--test-concurrency=2', '--test-reporter=spec', ...files], { stdio: 'inherit' });
process.exit(result.status ?? 1);
