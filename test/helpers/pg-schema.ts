import { createHash } from 'node:crypto';
import { Client } from 'pg';

/** The test PostgreSQL (trust auth); override with WAYPOINT_TEST_PG_URL. */
export const PG_TEST_URL = process.env.WAYPOINT_TEST_PG_URL ?? 'postgres://postgres@127.0.0.1:5432/test';

/**
 * A schema name derived from a test's name (as pg-boss does) and the checkout it runs from: stable, so a
 * run killed mid-test leaves a schema the next run drops first, and distinct per test and per checkout, so
 * tests running in parallel never share tables, also when two worktrees run the same test on the one
 * server (each would otherwise drop the other's schema mid-run).
 *
 * @example
 * schemaFor('postgres conformance: createRun ...') // 'wpt_3f2a...'
 */
export function schemaFor(testName: string): string {
  return `wpt_${createHash('sha256').update(`${CHECKOUT}\n${testName}`).digest('hex').slice(0, 24)}`;
}

/** This checkout's test helpers directory (compiled: <checkout>/dist/test/helpers): one per worktree. */
const CHECKOUT = __dirname;

/** DROP SCHEMA ... CASCADE on its own short-lived connection. */
export async function dropSchema(schema: string, url = PG_TEST_URL): Promise<void> {
  const client = new Client({ connectionString: url });
  await client.connect();
  try {
    await client.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
  } finally {
    await client.end();
  }
}
