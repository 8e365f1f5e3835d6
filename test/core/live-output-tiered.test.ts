import { randomUUID } from 'node:crypto';
import { tieredStorage } from '../../src/index';
import { dropSchema, PG_TEST_URL, schemaFor } from '../helpers/pg-schema';
import { deleteKeysUnder, REDIS_TEST_URL } from '../lease/backends';
import { liveOutputSuite } from './live-output-suite';

const schema = schemaFor('live output, the writing side, tiered');
const keyPrefix = `wp-test:live-output-tiered:${randomUUID().slice(0, 8)}:`;
liveOutputSuite(
  'the tiered store (Redis in front of PostgreSQL)',
  () => tieredStorage({ redis: { url: REDIS_TEST_URL, keyPrefix }, postgres: { url: PG_TEST_URL, schema, poolSize: 2 } }),
  async () => {
    await deleteKeysUnder(keyPrefix);
    await dropSchema(schema);
  },
);
