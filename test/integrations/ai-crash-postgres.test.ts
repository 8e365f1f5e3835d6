import { dropSchema, PG_TEST_URL, schemaFor } from '../helpers/pg-schema';
import { aiCrashSuite } from './ai-crash-suite';

aiCrashSuite('PostgreSQL', async (name) => {
  const schema = schemaFor(name);
  await dropSchema(schema); // left over by a test run that was killed
  return { spec: { kind: 'postgres', url: PG_TEST_URL, schema }, dispose: () => dropSchema(schema) };
});
