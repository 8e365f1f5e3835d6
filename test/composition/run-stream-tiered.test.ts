import { randomUUID } from 'node:crypto';
import { tieredStorage } from '../../src/index';
import { dropSchema, PG_TEST_URL, schemaFor } from '../helpers/pg-schema';
import { deleteKeysUnder, REDIS_TEST_URL } from '../lease/backends';
import { defineRunStreamSuite } from './run-stream-suite';

/** waypoint.stream on the tiered store (Redis in front of PostgreSQL), encrypted at rest: parts are sealed. */
defineRunStreamSuite(async () => {
  const schema = schemaFor('run-stream-tiered');
  const prefix = `wpt-stream-tiered:${randomUUID().slice(0, 8)}:`;
  await dropSchema(schema);
  return {
    name: 'tiered, encrypted',
    modules: () => [tieredStorage({ redis: { url: REDIS_TEST_URL, keyPrefix: prefix }, postgres: { url: PG_TEST_URL, schema, poolSize: 2 } })],
    options: { encryption: { keys: { k1: Buffer.alloc(32, 7) }, activeKeyId: 'k1' } },
    child: { kind: 'tiered', schema, prefix, encrypted: true },
    dispose: async () => {
      await deleteKeysUnder(prefix);
      await dropSchema(schema);
    },
  };
});
