import { setTimeout as sleep } from 'node:timers/promises';
import { inject, injectable, type ServiceIdentifier } from 'inversify';
import { Agent, Step, type StepContext } from 'waypoint-durable';
import { Activity } from './activity';
import { ESignService } from './esign';
import type { ContractState, Decision } from './state';

type Ctx = StepContext<ContractState>;

/** How long the review spends on each clause (a stand-in for one model call per clause). */
export interface ReviewConfig {
  clauseMs: number;
}

export const REVIEW_CONFIG: ServiceIdentifier<ReviewConfig> = Symbol.for('approval-workflow:ReviewConfig');

/** The signal a person answers with. */
export const APPROVAL_SIGNAL = 'legal-approval';

/** Reads the key terms: fast and deterministic. */
@injectable()
export class IntakeAgent extends Agent {
  constructor(@inject(Activity) private readonly activity: Activity) {
    super();
  }

  @Step()
  extractTerms(ctx: Ctx) {
    const { clauses } = ctx.state;
    const cap = clauses.map((c) => /liability .*capped at \$([\d,]+)/i.exec(c)?.[1]).find(Boolean);
    const terms = {
      clauseCount: clauses.length,
      renewal: clauses.some((c) => /auto-renew/i.test(c)) ? ('auto' as const) : ('manual' as const),
      liabilityCapUsd: cap ? Number(cap.replace(/,/g, '')) : null,
    };
    this.activity.record('IntakeAgent/extractTerms', 'done', `${terms.clauseCount} clauses, ${terms.renewal} renewal`);
    return { terms };
  }
}

const RISKY = [/unlimited/i, /auto-renew/i, /exclusive/i, /without notice/i];

/**
 * Reviews every clause, one slow call each. It honours its abort signal: on SIGTERM it stops at once,
 * the step is not recorded, and the resumed run reviews the contract again from its first clause.
 */
@injectable()
export class ReviewAgent extends Agent<{ reviews: number }> {
  override memory = { reviews: 0 };

  constructor(
    @inject(Activity) private readonly activity: Activity,
    @inject(REVIEW_CONFIG) private readonly config: ReviewConfig,
  ) {
    super();
  }

  @Step({ retries: 2, timeoutMs: 5 * 60_000 })
  async assessRisk(ctx: Ctx) {
    const key = 'ReviewAgent/assessRisk';
    const { clauses } = ctx.state;
    const findings: string[] = [];
    this.activity.record(key, 'start', `${clauses.length} clauses`);
    for (const [i, clause] of clauses.entries()) {
      try {
        await sleep(this.config.clauseMs, undefined, { signal: ctx.signal });
      } catch (error) {
        this.activity.record(key, 'aborted', `after ${i} of ${clauses.length} clauses`);
        throw error;
      }
      if (RISKY.some((re) => re.test(clause))) findings.push(`clause ${i + 1}: ${clause}`);
      this.activity.record(key, 'progress', `clause ${i + 1}/${clauses.length}`);
    }
    this.memory.reviews += 1;
    const risk = findings.length >= 2 ? 'high' : findings.length === 1 ? 'medium' : 'low';
    this.activity.record(key, 'done', `risk ${risk}, ${findings.length} finding(s)`);
    return { risk, findings } as const;
  }
}

/**
 * Asks legal to approve. Until `waypoint.signal(runId, 'legal-approval', decision)` arrives, the run is
 * checkpointed as `waiting` and the worker process exits; a later resume returns the decision here.
 */
@injectable()
export class ApprovalAgent extends Agent {
  constructor(@inject(Activity) private readonly activity: Activity) {
    super();
  }

  @Step()
  async requestApproval(ctx: Ctx) {
    const key = 'ApprovalAgent/requestApproval';
    this.activity.record(key, 'waiting', `asks legal for '${APPROVAL_SIGNAL}' (risk ${ctx.state.risk})`);
    const decision = await ctx.waitFor<Decision>(APPROVAL_SIGNAL, { timeoutMs: 7 * 24 * 3600_000 });
    this.activity.record(key, 'done', `${decision.approved ? 'approved' : 'rejected'} by ${decision.by}${decision.note ? ` (${decision.note})` : ''}`);
    return { decision };
  }
}

/** Sends an approved contract for signature (once, however often the run resumes), or returns it. */
@injectable()
export class SigningAgent extends Agent {
  constructor(
    @inject(Activity) private readonly activity: Activity,
    @inject(ESignService) private readonly esign: ESignService,
  ) {
    super();
  }

  @Step()
  async finish(ctx: Ctx) {
    const key = 'SigningAgent/finish';
    const { contractId, vendorEmail, decision } = ctx.state;
    if (!decision?.approved) {
      this.activity.record(key, 'done', 'returned to the vendor unsigned');
      return { outcome: 'returned-to-vendor' } as const;
    }
    const { envelopeId } = await this.esign.send(contractId, vendorEmail);
    this.activity.record(key, 'done', `envelope ${envelopeId} sent to ${vendorEmail}`);
    return { outcome: 'sent-for-signature', envelope: { envelopeId, sentTo: vendorEmail } } as const;
  }
}
