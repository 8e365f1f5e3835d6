import 'reflect-metadata';
import { strict as assert } from 'node:assert';
import { after, before, describe, it } from 'node:test';
import { postgresStorage } from '../../src/index';
import { crashTest } from '../../src/testing/index';
import { PG_TEST_URL, dropSchema, schemaFor } from '../helpers/pg-schema';
import { EmailFromPlainStep, EmailFromSideEffect, mailerModule } from './email-pipelines';
import { ShipKeyedByItem, ShipKeyedByOrder, warehouseModule } from './ship-pipelines';
import { observeWorld } from './world';

// The same pipelines on PostgreSQL, in a schema of their own: every simulated process opens its own pool.
describe('crashTest on PostgreSQL', () => {
  const schema = schemaFor('test kit on postgres');
  const storage = postgresStorage({ url: PG_TEST_URL, schema });
  before(() => dropSchema(schema));
  after(() => dropSchema(schema));

  it('catches the email from a plain @Step and passes the @SideEffect one (straight line)', async () => {
    const wrong = await crashTest(EmailFromPlainStep, { input: { orderId: 'o-3' }, modules: [storage, mailerModule], observe: observeWorld });
    const problem = wrong.problems.find((p) => p.kind === 'observed-differs');
    assert.equal(problem?.point, 'before-step-row NotifyPlain/notify #1', wrong.summary);
    const right = await crashTest(EmailFromSideEffect, { input: { orderId: 'o-3' }, modules: [storage, mailerModule], observe: observeWorld });
    assert.ok(right.ok, right.summary);
  });

  it('catches forEach items keyed by their order and passes items keyed by their operation (control flow)', async () => {
    const wrong = await crashTest(ShipKeyedByOrder, { input: { parcels: ['a', 'b', 'c'] }, modules: [storage, warehouseModule], observe: observeWorld });
    assert.ok(
      wrong.problems.some((p) => p.kind === 'observed-differs' && p.step.startsWith('forEach(shipped)[')),
      wrong.summary,
    );
    const right = await crashTest(ShipKeyedByItem, { input: { parcels: ['a', 'b', 'c'] }, modules: [storage, warehouseModule], observe: observeWorld });
    assert.ok(right.ok, right.summary);
  });
});
