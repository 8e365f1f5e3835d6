import { strict as assert } from 'node:assert';
import { spawnSync } from 'node:child_process';
import { hostname } from 'node:os';
import { describe, it } from 'node:test';
import { defaultWorkerId, holderIsDead, isZombie } from '../../src/core/lease/run-lease';
import { spawnUnreaped } from '../helpers/child-process';

describe('dead lease holders on this host', () => {
  it('a live process on this host is alive; an exited one is dead; other hosts and custom ids are presumed alive', () => {
    assert.equal(holderIsDead(`${hostname()}:${process.ppid}:abc`), false);
    const child = spawnSync(process.execPath, ['-e', 'console.log(process.pid)'], { encoding: 'utf8' });
    const exitedPid = Number(child.stdout.trim());
    assert.equal(holderIsDead(`${hostname()}:${exitedPid}:abc`), true);
    assert.equal(holderIsDead(`another-host-${hostname()}:${exitedPid}:abc`), false);
    assert.equal(holderIsDead('worker-7'), false);
    assert.equal(holderIsDead(`${hostname()}:${process.pid}:earlier`), true, 'an earlier process with our pid (container restart)');
    assert.match(defaultWorkerId('r4nd'), new RegExp(`^${hostname()}:${process.pid}:r4nd$`));
  });

  it('a process killed and not yet reaped by its parent (a zombie) is dead at once', async () => {
    // The child's parent never reaps it, so it stays a zombie after it is killed, as a killed worker does
    // until its parent's event loop reaps it.
    const { pid, parent } = await spawnUnreaped('sleep', ['30']);
    try {
      assert.equal(holderIsDead(`${hostname()}:${pid}:abc`), false, 'a running process is alive');
      process.kill(pid, 'SIGKILL');
      for (let i = 0; i < 100 && !isZombie(pid); i++) await new Promise((resolve) => setTimeout(resolve, 10));
      assert.equal(isZombie(pid), true, 'the killed child is a zombie of its parent');
      process.kill(pid, 0); // still "exists" for kill(pid, 0): the case holderIsDead must see through
      assert.equal(holderIsDead(`${hostname()}:${pid}:abc`), true);
      assert.equal(isZombie(process.pid), false);
    } finally {
      parent.kill('SIGKILL');
    }
  });
});
