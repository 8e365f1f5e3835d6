import { randomUUID } from 'node:crypto';
import { redisStorage } from '../../src/index';
import { resumeSnapshotSuite } from './resume-snapshot-suite';

const keyPrefix = `wp-test:resume-snapshot:${randomUUID()}:`;
resumeSnapshotSuite('Redis', () => redisStorage({ url: process.env.WAYPOINT_TEST_REDIS_URL ?? 'redis://127.0.0.1:6379', keyPrefix }));
