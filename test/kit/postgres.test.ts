import 'reflect-metadata';
import { after, before, describe } from 'node:test';
import { postgresStorage } from '../../src/index';
import { PG_TEST_URL, dropSchema, schemaFor } from '../helpers/pg-schema';
import { kitOnStore } from './store-suite';

// The same pipelines on PostgreSQL, in a schema of their own: every simulated process opens its own pool.
describe('crashTest on PostgreSQL', () => {
  const schema = schemaFor('test kit on postgres');
  before(() => dropSchema(schema));
  after(() => dropSchema(schema));
  kitOnStore(postgresStorage({ url: PG_TEST_URL, schema }), 'o-3');
});
