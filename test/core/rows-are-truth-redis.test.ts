import { randomUUID } from 'node:crypto';
import { redisStorage } from '../../src/index';
import { rowsAreTruthSuite } from './rows-are-truth-suite';

const keyPrefix = `wp-test:rows-truth:${randomUUID()}:`;
rowsAreTruthSuite('Redis', () => redisStorage({ url: process.env.WAYPOINT_TEST_REDIS_URL ?? 'redis://127.0.0.1:6379', keyPrefix }));
