import { randomUUID } from 'node:crypto';
import { redisStorage } from '../../src/index';
import { controlFlowSuite } from './control-flow-suite';

const keyPrefix = `wp-test:flow:${randomUUID()}:`;
controlFlowSuite('Redis', () => redisStorage({ url: process.env.WAYPOINT_TEST_REDIS_URL ?? 'redis://127.0.0.1:6379', keyPrefix }));
