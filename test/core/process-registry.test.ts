import 'reflect-metadata';
import { strict as assert } from 'node:assert';
import { createRequire } from 'node:module';
import { hostname } from 'node:os';
import { describe, it } from 'node:test';
import { Redis } from 'ioredis';
import { activeRuns, isLiveWorker, registerLiveWorker } from '../../src/core/lease/process-registry';
import { defaultWorkerId, holderIsDead } from '../../src/core/lease/run-lease';
import { EncryptingCheckpointStore } from '../../src/storage/encrypting-store';
import { MemoryCheckpointStore } from '../../src/storage/memory-store';
import { RedisCheckpointStore } from '../../src/storage/redis/redis-store';
import { postgresLocation, redisLocation, sqliteLocation } from '../../src/storage/store-location';
import { TieredCheckpointStore } from '../../src/storage/tiered/tiered-store';
import { WriteBehindCheckpointStore } from '../../src/storage/tiered/write-behind-store';
import { TypeOrmCheckpointStore } from '../../src/storage/sql/typeorm-store';

// Liveness of a lease holder is never inferred from a pid equal to ours: an id with our pid is alive
// exactly when this process registered it (a Waypoint or a held lease uses it), and otherwise an earlier
// process that had our pid (a container restart), whose lease is taken over at once.
describe('holders with our own pid', () => {
  it('unregistered: an earlier incarnation of this pid, dead; registered: alive; unregistered again: dead', () => {
    const id = defaultWorkerId('unit01');
    assert.equal(holderIsDead(id), true, 'not registered here: a previous process with our pid');
    const unregister = registerLiveWorker(id);
    assert.equal(holderIsDead(id), false, 'registered: alive in this process');
    unregister();
    assert.equal(holderIsDead(id), true);
  });

  it('registrations count: the id stays alive until every holder let go; a second unregister call is a no-op', () => {
    const id = `${hostname()}:${process.pid}:unit02`;
    const first = registerLiveWorker(id);
    const second = registerLiveWorker(id);
    first();
    first();
    assert.equal(isLiveWorker(id), true, 'the second registration still holds it');
    assert.equal(holderIsDead(id), false);
    second();
    assert.equal(isLiveWorker(id), false);
  });

  it('the registry is shared by two copies of the module (globalThis, registered symbol)', () => {
    const require = createRequire(__filename);
    const path = require.resolve('../../src/core/lease/process-registry');
    const cached = require.cache[path];
    delete require.cache[path];
    try {
      const copy = require(path) as typeof import('../../src/core/lease/process-registry');
      assert.notEqual(copy.registerLiveWorker, registerLiveWorker, 'a second copy of the module was loaded');
      const id = `${hostname()}:${process.pid}:unit03`;
      const unregister = copy.registerLiveWorker(id);
      assert.equal(isLiveWorker(id), true, 'registered through the copy, seen here');
      assert.equal(holderIsDead(id), false);
      unregister();
      assert.equal(holderIsDead(id), true);
    } finally {
      if (cached) require.cache[path] = cached;
    }
  });
});

describe('store locations and the in-process run guard', () => {
  const pg = 'postgres://postgres@127.0.0.1:5432/test';

  it('two store objects on one database share a location; other databases, schemas and prefixes do not', () => {
    const a = new TypeOrmCheckpointStore({ type: 'sqlite', path: '/tmp/wp-loc/x/../w.db' });
    const b = new TypeOrmCheckpointStore({ type: 'sqlite', path: '/tmp/wp-loc/w.db' });
    assert.equal(a.location, sqliteLocation('/tmp/wp-loc/w.db', 'waypoint_'));
    assert.equal(a.location, b.location);
    assert.notEqual(new TypeOrmCheckpointStore({ type: 'sqlite', path: '/tmp/wp-loc/w.db', tablePrefix: 'other_' }).location, a.location);
    const p1 = new TypeOrmCheckpointStore({ type: 'postgres', url: pg, schema: 's1' });
    assert.equal(p1.location, 'postgres://127.0.0.1:5432/test?schema=s1#waypoint_');
    assert.equal(
      new TypeOrmCheckpointStore({ type: 'postgres', url: 'postgres://other:pw@127.0.0.1/test', schema: 's1' }).location,
      p1.location,
      'the role does not matter with a schema; 5432 is the default port',
    );
    assert.notEqual(new TypeOrmCheckpointStore({ type: 'postgres', url: pg, schema: 's2' }).location, p1.location);
    assert.notEqual(
      postgresLocation(pg, undefined, 'waypoint_'),
      postgresLocation('postgres://app@127.0.0.1:5432/test', undefined, 'waypoint_'),
      'search_path depends on the role',
    );
    assert.equal(postgresLocation('not a url', 's', 'p_'), undefined);
    assert.equal(new MemoryCheckpointStore().location, undefined, 'each memory store is its own database');
  });

  it('Redis, tiered, write-behind and encrypting stores report where their leases live', async () => {
    const redis = new RedisCheckpointStore({ url: 'redis://127.0.0.1:6379/2', keyPrefix: 'app:' });
    assert.equal(redis.location, 'redis://127.0.0.1:6379/2#app:');
    const client = new Redis('redis://127.0.0.1:6379/2', { lazyConnect: true });
    assert.equal(new RedisCheckpointStore({ client, keyPrefix: 'app:' }).location, redis.location, 'a given client: the same server and db');
    assert.equal(redisLocation(client, 'other:'), 'redis://127.0.0.1:6379/2#other:');
    const tiered = new TieredCheckpointStore({ redis: { url: 'redis://127.0.0.1:6379' }, postgres: { url: pg, schema: 's1' } });
    assert.equal(tiered.location, 'postgres://127.0.0.1:5432/test?schema=s1#waypoint_', 'write-through: the PostgreSQL tier');
    const behind = new WriteBehindCheckpointStore({
      redis: { url: 'redis://127.0.0.1:6379', keyPrefix: 'wb:' },
      postgres: { url: pg, schema: 's1' },
      writeBehind: { disableFlusher: true },
    });
    assert.equal(behind.location, 'redis://127.0.0.1:6379/0#wb:', 'write-behind: the Redis tier');
    const key = Buffer.alloc(32, 7);
    assert.equal(new EncryptingCheckpointStore(tiered, { activeKeyId: 'k', keys: { k: key } }).location, tiered.location);
    await Promise.all([redis.close(), tiered.close(), behind.close()]);
    client.disconnect();
  });

  it('activeRuns is one map per location across store objects, and per object without a location', () => {
    const a = new TypeOrmCheckpointStore({ type: 'sqlite', path: '/tmp/wp-loc/guard.db' });
    const b = new TypeOrmCheckpointStore({ type: 'sqlite', path: '/tmp/wp-loc/guard.db' });
    assert.equal(activeRuns(a), activeRuns(b));
    const m1 = new MemoryCheckpointStore();
    const m2 = new MemoryCheckpointStore();
    assert.equal(activeRuns(m1), activeRuns(m1));
    assert.notEqual(activeRuns(m1), activeRuns(m2));
    assert.notEqual(activeRuns(a), activeRuns(new TypeOrmCheckpointStore({ type: 'sqlite', path: '/tmp/wp-loc/other.db' })));
  });
});
