/**
 * Runs or resumes one contract-approval run until it completes, pauses (SIGTERM / SIGINT) or waits for
 * the approval, then prints its RunResult as one JSON line. Exit code: 0 completed, 75 paused or waiting
 * (restart me later), 1 failed (`{"error":{...}}` on stdout).
 *
 *   node dist/examples/approval-workflow/worker.js <runId>
 *
 * Environment: APPROVAL_DB (SQLite file, default ./.waypoint/approval.db), APPROVAL_OUTBOX (default
 * ./.waypoint/envelopes.jsonl), APPROVAL_ACTIVITY (activity log), APPROVAL_CLAUSE_MS, APPROVAL_WORKER_ID.
 */
import 'reflect-metadata';
import { Waypoint, sqliteStorage } from 'waypoint-durable';
import { runWorkerMain } from '../demo-support';
import { ContractApproval, DEMO_CONTRACT, approvalModule } from './pipeline';

async function main(): Promise<void> {
  const env = process.env;
  const runId = process.argv[2] ?? 'contract-42';
  const waypoint = await Waypoint.create({
    modules: [
      approvalModule({
        outboxPath: env.APPROVAL_OUTBOX || './.waypoint/envelopes.jsonl',
        activityPath: env.APPROVAL_ACTIVITY || undefined,
        clauseMs: env.APPROVAL_CLAUSE_MS ? Number(env.APPROVAL_CLAUSE_MS) : undefined,
      }),
      sqliteStorage({ path: env.APPROVAL_DB || './.waypoint/approval.db' }),
    ],
    workerId: env.APPROVAL_WORKER_ID || undefined,
  });
  try {
    // Installs SIGTERM / SIGINT handlers for this call only, and sets process.exitCode.
    const result = await waypoint.runUntilSignal(ContractApproval, { runId, input: DEMO_CONTRACT, gracePeriodMs: 5_000 });
    process.stdout.write(JSON.stringify(result) + '\n');
  } finally {
    await waypoint.close();
  }
}

runWorkerMain(main);
