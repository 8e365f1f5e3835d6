import { randomUUID } from 'node:crypto';
import { redisStorage } from '../../src/storage/redis/module';
import { deleteKeysUnder, REDIS_TEST_URL } from '../lease/backends';
import { defineRunStreamSuite } from './run-stream-suite';

/** waypoint.stream on Redis: a key prefix of its own, deleted afterwards (never FLUSHDB). */
defineRunStreamSuite(() => {
  const prefix = `wpt-stream-read:${randomUUID().slice(0, 8)}:`;
  return Promise.resolve({
    name: 'redis',
    modules: () => [redisStorage({ url: REDIS_TEST_URL, keyPrefix: prefix })],
    child: { kind: 'redis', prefix },
    dispose: () => deleteKeysUnder(prefix),
  });
});
