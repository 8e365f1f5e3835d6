import 'reflect-metadata';
import { strict as assert } from 'node:assert';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, realpathSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { Agent, Pipeline, Step, Waypoint, sqliteStorage } from '../../src/index';
import { CLI } from './cli-harness';

class Greeter extends Agent {
  @Step() greet() {
    return { greeting: 'hello' };
  }
}
@Pipeline({ name: 'greeting', version: '1', agents: [Greeter] })
class Greeting {}

const dir = realpathSync(mkdtempSync(join(tmpdir(), 'waypoint-cli-default-')));
after(() => rmSync(dir, { recursive: true, force: true }));

function cliIn(cwd: string, ...args: string[]) {
  const env = { ...process.env };
  delete env.WAYPOINT_STORE;
  delete env.WAYPOINT_MODULE;
  return spawnSync(process.execPath, [CLI, ...args], { cwd, env, encoding: 'utf8', timeout: 30_000 });
}

describe('the CLI without --store opens the library’s default store and says which file', () => {
  const dbPath = join(dir, '.waypoint', 'waypoint.db');

  it('no store file there yet: exit 5, naming the default file it looked for', () => {
    const run = cliIn(dir, 'runs', 'list');
    assert.equal(run.status, 5, run.stderr);
    const lines = run.stderr.trim().split('\n');
    assert.equal(lines[0], `waypoint: no --store given; using the default store sqlite:${dbPath} (pass --store or set WAYPOINT_STORE for another)`);
    assert.match(lines[1] ?? '', /holds no Waypoint store \(no such file\)/);
  });

  it('reads the runs a program in that directory wrote with the default store', async () => {
    const waypoint = await Waypoint.create({ modules: [sqliteStorage({ path: dbPath })] });
    await waypoint.run(Greeting, { runId: 'hello-1', input: {} });
    await waypoint.close();
    const run = cliIn(dir, 'runs', 'list', '--json');
    assert.equal(run.status, 0, run.stderr);
    assert.match(run.stderr, new RegExp(`using the default store sqlite:${dbPath.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&')}`));
    const listed = JSON.parse(run.stdout) as { runId: string; status: string }[];
    assert.deepEqual(
      listed.map((r) => [r.runId, r.status]),
      [['hello-1', 'completed']],
    );
  });
});
