/**
 * What a person (or the approval UI's backend) runs to answer a waiting contract run, from any process:
 *
 *   node dist/examples/approval-workflow/approve.js <runId> approve|reject <by> [note]
 *
 * Records the decision with `waypoint.signal`; the next resume of the run continues with it. Prints
 * `{"delivered":true|false}` (false: a decision had already been delivered; the first one stands).
 * Environment: APPROVAL_DB as for worker.js.
 */
import 'reflect-metadata';
import { Waypoint, sqliteStorage } from 'waypoint-durable';
import { runWorkerMain } from '../demo-support';
import { APPROVAL_SIGNAL } from './agents';
import type { Decision } from './state';

async function main(): Promise<void> {
  const [runId, verdict, by, note] = process.argv.slice(2);
  if (!runId || (verdict !== 'approve' && verdict !== 'reject') || !by) {
    throw new Error('usage: approve.js <runId> approve|reject <by> [note]');
  }
  const waypoint = await Waypoint.create({ modules: [sqliteStorage({ path: process.env.APPROVAL_DB || './.waypoint/approval.db' })] });
  try {
    const decision: Decision = { approved: verdict === 'approve', by, ...(note ? { note } : {}) };
    const delivered = await waypoint.signal(runId, APPROVAL_SIGNAL, decision);
    process.stdout.write(JSON.stringify({ delivered, decision }) + '\n');
  } finally {
    await waypoint.close();
  }
}

runWorkerMain(main);
