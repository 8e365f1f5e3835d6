import { randomUUID } from 'node:crypto';
import { redisStorage } from '../../src/index';
import { durabilityAsyncSuite } from './durability-async-suite';

const keyPrefix = `wp-test:durability-async:${randomUUID()}:`;
durabilityAsyncSuite('Redis', () => redisStorage({ url: process.env.WAYPOINT_TEST_REDIS_URL ?? 'redis://127.0.0.1:6379', keyPrefix }));
