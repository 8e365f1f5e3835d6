import { strict as assert } from 'node:assert';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { after, describe, it } from 'node:test';
import { PG_TEST_URL } from '../helpers/pg-schema';

const PRELOAD = resolve(__dirname, '../helpers/hide-module.js');
const INDEX = resolve(__dirname, '../../src/index.js');
const CLI = resolve(__dirname, '../../src/cli/main.js');
const dir = mkdtempSync(join(tmpdir(), 'waypoint-missing-dep-'));
after(() => rmSync(dir, { recursive: true, force: true }));

/** Opens a Waypoint on `storage` (source of a module expression) in a child process missing `hide`. */
function openWith(hide: string, storage: string): { code?: string; message?: string; ok?: boolean } {
  const script = `
    require('reflect-metadata');
    const w = require(${JSON.stringify(INDEX)});
    Promise.resolve().then(() => w.Waypoint.create({ modules: [${storage}] }))
      .then(async (waypoint) => { await waypoint.close(); console.log(JSON.stringify({ ok: true })); })
      .catch((error) => console.log(JSON.stringify({ code: error.code, message: error.message })));`;
  const child = spawnSync(process.execPath, ['--require', PRELOAD, '-e', script], { env: { ...process.env, WAYPOINT_TEST_HIDE: hide }, encoding: 'utf8', timeout: 30_000 });
  const line = child.stdout.trim().split('\n').pop() ?? '';
  assert.ok(line.startsWith('{'), `child printed no result: ${child.stdout} ${child.stderr}`);
  return JSON.parse(line) as { code?: string; message?: string };
}

describe('a missing client package or native build is MISSING_DEPENDENCY, with what to run', () => {
  it('postgresStorage without pg names the package and the install command', () => {
    const result = openWith('pg', `w.postgresStorage({ url: ${JSON.stringify(PG_TEST_URL)} })`);
    assert.equal(result.code, 'MISSING_DEPENDENCY', JSON.stringify(result));
    assert.match(result.message!, /'pg' package is not installed/);
    assert.match(result.message!, /npm install pg/);
    assert.doesNotMatch(result.message!, /reachable|resume the run/);
  });

  it('redisStorage without ioredis names the package and the install command', () => {
    const result = openWith('ioredis', `w.redisStorage({ url: 'redis://127.0.0.1:6379', keyPrefix: 'missing-dep:' })`);
    assert.equal(result.code, 'MISSING_DEPENDENCY', JSON.stringify(result));
    assert.match(result.message!, /npm install ioredis/);
  });

  it('sqliteStorage without better-sqlite3’s native build says how to approve and rebuild it', () => {
    const result = openWith('better-sqlite3-native', `w.sqliteStorage({ path: ${JSON.stringify(join(dir, 'native.db'))} })`);
    assert.equal(result.code, 'MISSING_DEPENDENCY', JSON.stringify(result));
    assert.match(result.message!, /better-sqlite3' package is installed without a working native build/);
    assert.match(result.message!, /npm install-scripts approve better-sqlite3/);
    assert.match(result.message!, /npm rebuild better-sqlite3/);
    assert.doesNotMatch(result.message!, /reachable|resume the run/);
  });

  it('sqliteStorage without better-sqlite3 at all names the package', () => {
    const result = openWith('better-sqlite3', `w.sqliteStorage({ path: ${JSON.stringify(join(dir, 'absent.db'))} })`);
    assert.equal(result.code, 'MISSING_DEPENDENCY', JSON.stringify(result));
    assert.match(result.message!, /npm install better-sqlite3/);
  });

  it('S3ArchiveSink without @aws-sdk/client-s3: its entry loads, the first archive call names the package', () => {
    const script = `
      const { S3ArchiveSink } = require(${JSON.stringify(resolve(__dirname, '../../src/integrations/s3/index.js'))});
      const sink = new S3ArchiveSink({ bucket: 'absent-sdk' });
      sink.entries('r').then(() => console.log(JSON.stringify({ ok: true })), (error) => console.log(JSON.stringify({ code: error.code, message: error.message })));`;
    const child = spawnSync(process.execPath, ['--require', PRELOAD, '-e', script], {
      env: { ...process.env, WAYPOINT_TEST_HIDE: '@aws-sdk/client-s3' },
      encoding: 'utf8',
      timeout: 30_000,
    });
    const result = JSON.parse(child.stdout.trim().split('\n').pop() || '{}') as { code?: string; message?: string };
    assert.equal(result.code, 'MISSING_DEPENDENCY', `${child.stdout} ${child.stderr}`);
    assert.match(result.message!, /npm install @aws-sdk\/client-s3/);
  });

  it('the same stores open when nothing is hidden', () => {
    assert.deepEqual(openWith('', `w.sqliteStorage({ path: ${JSON.stringify(join(dir, 'fine.db'))} })`), { ok: true });
  });

  it('the CLI on SQLite without the native build exits 1 (not 5, store unavailable) with the advice', () => {
    assert.deepEqual(openWith('', `w.sqliteStorage({ path: ${JSON.stringify(join(dir, 'cli.db'))} })`), { ok: true });
    const child = spawnSync(process.execPath, ['--require', PRELOAD, CLI, '--store', `sqlite:${join(dir, 'cli.db')}`, 'runs', 'list'], {
      env: { ...process.env, WAYPOINT_TEST_HIDE: 'better-sqlite3-native' },
      encoding: 'utf8',
      timeout: 30_000,
    });
    assert.equal(child.status, 1, child.stderr);
    assert.match(child.stderr + child.stdout, /installed without a working native build/);
    assert.match(child.stderr + child.stdout, /npm install-scripts approve better-sqlite3/);
  });
});
