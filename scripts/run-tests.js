#!/usr/bin/env node
// Runs every compiled test file under dist/test with node's test runner. Node 20's --test takes no
// globs, so the files are listed here. Extra arguments are passed through (e.g. a file filter).
'use strict';
const { spawnSync } = require('node:child_process');
const { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync } = require('node:fs');
const { tmpdir } = require('node:os');
const { join, relative } = require('node:path');
const { pathToFileURL } = require('node:url');

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
// No --test-force-exit: with it a file exits as soon as its last test ends, before its reporter has sent the
// parent everything, so a file's later results went missing from the log (its exit code still failed the
// run). A file that leaves a handle open (a test that timed out leaves its sockets and child processes behind)
// is bounded by --test-timeout instead, which the parent applies to each file as a whole: it kills the file and
// reports it failed. Tests that need longer than a few minutes set their own timeout.
const FILE_TIMEOUT_MS = 20 * 60 * 1000;
const failuresDir = mkdtempSync(join(tmpdir(), 'waypoint-tests-'));
const failuresFile = join(failuresDir, 'failures.jsonl');
const reporter = join(__dirname, 'lib', 'failures-reporter.mjs');
let status = 0;
for (const pass of passes) {
  if (pass.files.length === 0) continue;
  const args = ['--test', `--test-timeout=${FILE_TIMEOUT_MS}`, `--test-concurrency=${pass.concurrency}`];
  args.push('--test-reporter=spec', '--test-reporter-destination=stdout');
  args.push(`--test-reporter=${pathToFileURL(reporter).href}`, `--test-reporter-destination=${failuresFile}.${passes.indexOf(pass)}`);
  const result = spawnSync(process.execPath, [...args, ...pass.files], { stdio: 'inherit' });
  if (result.status !== 0) status = result.status ?? 1;
}
printFailures(status);
rmSync(failuresDir, { recursive: true, force: true });
process.exit(status);

// Every failure again, last in the log: the spec reporter lists them after each pass, but the second pass's
// output follows the first's, and CI shows only a log's tail.
function printFailures(exitStatus) {
  const lines = passes.flatMap((_, i) => {
    const path = `${failuresFile}.${i}`;
    return existsSync(path) ? readFileSync(path, 'utf8').split('\n').filter(Boolean) : [];
  });
  if (lines.length === 0) {
    console.log(exitStatus === 0 ? '\nrun-tests: no test failed' : `\nrun-tests: a pass exited ${exitStatus}, no failed test reported`);
    return;
  }
  console.log(`\nrun-tests: ${lines.length} failed:`);
  for (const line of lines) {
    const { name, file, line: at, message } = JSON.parse(line);
    const whole = name === file; // the file itself: it timed out or exited non-zero
    const where = file && !whole ? `  (${relative(process.cwd(), file)}${at ? `:${at}` : ''})` : '';
    console.log(`  ✖ ${whole ? relative(process.cwd(), name) : name}${where}\n    ${message.replace(/\n/g, '\n    ')}`);
  }
}
