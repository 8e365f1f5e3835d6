import 'reflect-metadata';
import { ContainerModule } from 'inversify';
import { Pipeline, readPlan } from 'waypoint-durable';
import { ACTIVITY_CONFIG, Activity } from './activity';
import { ApprovalAgent, IntakeAgent, REVIEW_CONFIG, ReviewAgent, SigningAgent } from './agents';
import { ESIGN_CONFIG, ESignService } from './esign';
import { ContractState } from './state';

/**
 * A vendor contract goes through intake, a long clause-by-clause review, a human approval, and is sent
 * for signature. The review honours SIGTERM (the run pauses and resumes later); the approval makes the
 * run `waiting` until a person answers from any process.
 *
 * @example
 * const waypoint = await Waypoint.create({ modules: [approvalModule({ outboxPath }), sqliteStorage({ path })] });
 * await waypoint.runUntilSignal(ContractApproval, { runId: 'contract-42', input: DEMO_CONTRACT });
 * // later, from anywhere: await waypoint.signal('contract-42', 'legal-approval', { approved: true, by: 'dana' });
 */
@Pipeline({
  name: 'contract-approval',
  version: '1.0.0',
  state: ContractState,
  agents: [IntakeAgent, ReviewAgent, ApprovalAgent, SigningAgent],
})
export class ContractApproval {}

/** The contract every demo run reviews. */
export const DEMO_CONTRACT = {
  contractId: 'VND-42',
  vendor: 'Acme Analytics',
  vendorEmail: 'contracts@acme.example',
  amountUsd: 180_000,
  clauses: [
    'Term of 24 months from the effective date.',
    'Fees of $7,500 per month, invoiced quarterly.',
    'The agreement will auto-renew for 12 months unless cancelled 90 days before the end of the term.',
    'Either party may terminate for material breach with 30 days to cure.',
    "Vendor's liability is capped at $180,000.",
    'Customer grants the vendor an exclusive right to process its analytics data.',
    'Customer data is deleted within 30 days of termination.',
    'Governed by the laws of the State of New York.',
  ],
};

/** Step keys (`agentId/stepName`) in execution order. */
export function stepKeys(): string[] {
  return readPlan(ContractApproval).steps.map((s) => s.key);
}

/** Settings of the example's services. */
export interface ApprovalOptions {
  /** The fake e-signature provider's outbox (JSON lines). */
  outboxPath: string;
  /** Activity log for the demo's transcript; none when omitted. */
  activityPath?: string;
  /** Time per reviewed clause. Default 150 ms. */
  clauseMs?: number;
}

/**
 * Binds the example's services into the Waypoint container.
 *
 * @example
 * Waypoint.create({ modules: [approvalModule({ outboxPath: '/tmp/envelopes.jsonl' }), memoryStorage()] });
 */
export function approvalModule(options: ApprovalOptions): ContainerModule {
  return new ContainerModule(({ bind }) => {
    bind(ACTIVITY_CONFIG).toConstantValue({ path: options.activityPath });
    bind(Activity).toSelf().inSingletonScope();
    bind(REVIEW_CONFIG).toConstantValue({ clauseMs: options.clauseMs ?? 150 });
    bind(ESIGN_CONFIG).toConstantValue({ outboxPath: options.outboxPath });
    bind(ESignService).toSelf().inSingletonScope();
  });
}
