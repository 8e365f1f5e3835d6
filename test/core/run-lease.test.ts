import { strict as assert } from 'node:assert';
import { spawnSync } from 'node:child_process';
import { hostname } from 'node:os';
import { describe, it } from 'node:test';
import { defaultWorkerId, holderIsDead } from '../../src/core/run-lease';

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
});
