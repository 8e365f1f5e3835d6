import { createHash, randomUUID } from 'node:crypto';
import type { CheckpointStore } from '../../src/storage/checkpoint-store';
import { PG_TEST_URL, dropSchema, schemaFor } from './pg-schema';
import { deleteKeysUnder } from '../lease/backends';

/** Where a two-tier store lives for one test: its own PostgreSQL schema and Redis key prefix. */
export interface TierPlace {
  schema: string;
  prefix: string;
  pgUrl: string;
}

/**
 * A conformance fixture for a store on Redis + PostgreSQL: a fresh schema (named from the test) and a
 * fresh key prefix, every store `open` makes on that same place (so `sibling` shares it), all of it
 * removed afterwards.
 *
 * @example
 * runStoreConformance({ name: 'tiered', makeStore: (name) => twoTierFixture(name, 'tier', (p) => new TieredCheckpointStore({ ... })) });
 */
export async function twoTierFixture(testName: string, tag: string, make: (place: TierPlace) => CheckpointStore) {
  const place: TierPlace = {
    schema: schemaFor(testName),
    prefix: `wp-test:${tag}:${createHash('sha256').update(testName).digest('hex').slice(0, 10)}-${randomUUID().slice(0, 8)}:`,
    pgUrl: PG_TEST_URL,
  };
  await dropSchema(place.schema);
  const stores: CheckpointStore[] = [];
  const open = () => {
    stores.push(make(place));
    return stores.at(-1)!;
  };
  return {
    store: open(),
    sibling: open,
    cleanup: async () => {
      await Promise.all(stores.map((s) => s.close()));
      await dropSchema(place.schema);
      await deleteKeysUnder(place.prefix);
    },
  };
}
