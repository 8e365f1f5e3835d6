import { randomUUID } from 'node:crypto';
import { redisStorage } from '../../src/storage/redis/module';
import { deleteKeysUnder, REDIS_TEST_URL } from '../lease/backends';
import { defineValuesSuite } from './values-suite';

/** The stored-values suite on Redis: a key prefix of its own, deleted afterwards (never FLUSHDB). */
defineValuesSuite(() => {
  const prefix = `wpt-values:${randomUUID().slice(0, 8)}:`;
  return Promise.resolve({ name: 'redis', modules: () => [redisStorage({ url: REDIS_TEST_URL, keyPrefix: prefix })], dispose: () => deleteKeysUnder(prefix) });
});
