import { randomUUID } from 'node:crypto';
import { redisStorage } from '../../src/index';
import { deleteKeysUnder, REDIS_TEST_URL } from '../lease/backends';
import { liveOutputSuite } from './live-output-suite';

const keyPrefix = `wp-test:live-output:${randomUUID().slice(0, 8)}:`;
liveOutputSuite(
  'Redis',
  () => redisStorage({ url: REDIS_TEST_URL, keyPrefix }),
  () => deleteKeysUnder(keyPrefix),
);
