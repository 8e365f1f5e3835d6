import { inject, injectable } from 'inversify';
import { Agent, Step, type StepContext } from 'waypoint-durable';
import { LLM, llmCall, type LlmClient } from './llm';
import { Outbox } from './outbox';
import type { Customer, CustomerReportState, FileReview, ReviewState } from './state';

type Ctx = StepContext<ReviewState>;

/** Reads the change and decides what to review: the files it touches and the customers it may affect. */
@injectable()
export class Planner extends Agent {
  constructor(@inject(LLM) private readonly llm: LlmClient) {
    super();
  }

  @Step({ retries: 2, timeoutMs: 60_000 })
  async plan(ctx: Ctx) {
    const { repo, change } = ctx.state;
    const note = await this.llm.complete(`Plan the review of '${change}' in ${repo}.`, llmCall(ctx));
    const files = [
      'src/auth/session.ts',
      'src/refunds/retry.ts',
      'src/refunds/queue.ts',
      'src/refunds/ledger.ts',
      'src/api/refunds.ts',
      'src/api/errors.ts',
      'test/refunds.test.ts',
      'docs/refunds.md',
    ];
    const customers: Customer[] = [
      { name: 'Globex', plan: 'enterprise' },
      { name: 'Initech', plan: 'pro' },
      { name: 'Umbrella', plan: 'free' },
    ];
    return { files, customers, findings: [`plan: ${note}`] };
  }
}

/** Branch 0 of the research `parallel`: two steps, searching then reading what it found. */
@injectable()
export class WebResearch extends Agent<{ queries: string[] }> {
  override memory = { queries: [] as string[] };
  constructor(@inject(LLM) private readonly llm: LlmClient) {
    super();
  }

  @Step({ retries: 2, timeoutMs: 60_000 })
  async search(ctx: Ctx) {
    this.memory.queries.push(`known issues: ${ctx.state.change}`);
    await this.llm.complete(`Search the web for ${this.memory.queries.join('; ')}.`, llmCall(ctx));
    return {};
  }

  @Step({ retries: 2, timeoutMs: 60_000 })
  async readPages(ctx: Ctx) {
    const webNotes = await this.llm.complete(`Read the pages found for ${this.memory.queries.join('; ')}.`, llmCall(ctx));
    return { webNotes, findings: [`web: ${webNotes}`] };
  }
}

/** Branch 1 of the research `parallel`, first of a sequence: reads the repository's docs. */
@injectable()
export class DocsResearch extends Agent {
  constructor(@inject(LLM) private readonly llm: LlmClient) {
    super();
  }

  @Step({ retries: 2, timeoutMs: 60_000 })
  async read(ctx: Ctx) {
    const docsNotes = await this.llm.complete(`Read the docs of ${ctx.state.repo} about ${ctx.state.change}.`, llmCall(ctx));
    return { docsNotes, findings: [`docs: ${docsNotes}`] };
  }
}

/** Branch 1, second: summarizes the docs notes (it sees its own branch's updates, not a sibling's). */
@injectable()
export class Summarizer extends Agent {
  constructor(@inject(LLM) private readonly llm: LlmClient) {
    super();
  }

  @Step({ retries: 2, timeoutMs: 60_000 })
  async summarize(ctx: Ctx) {
    const summary = await this.llm.complete(`Summarize: ${ctx.state.docsNotes}`, llmCall(ctx));
    return { summary };
  }
}

/** Branch 2 of the research `parallel`: checks the public API for breaking changes. */
@injectable()
export class ApiResearch extends Agent {
  constructor(@inject(LLM) private readonly llm: LlmClient) {
    super();
  }

  @Step({ retries: 2, timeoutMs: 60_000 })
  async inspect(ctx: Ctx) {
    const apiNotes = await this.llm.complete(`List breaking API changes in ${ctx.state.repo} for ${ctx.state.change}.`, llmCall(ctx));
    return { apiNotes, findings: [`api: ${apiNotes}`] };
  }
}

/** Writes the patch; its memory (the drafts so far) carries from one loop iteration to the next. */
@injectable()
export class CodeGen extends Agent<{ drafts: number }> {
  override memory = { drafts: 0 };
  constructor(@inject(LLM) private readonly llm: LlmClient) {
    super();
  }

  @Step({ retries: 2, timeoutMs: 60_000 })
  async generate(ctx: Ctx) {
    this.memory.drafts += 1;
    const feedback = ctx.state.testReport ? ` Fix: ${ctx.state.testReport}` : '';
    const code = await this.llm.complete(`Write draft ${this.memory.drafts} of '${ctx.state.change}' given ${ctx.state.summary}.${feedback}`, llmCall(ctx));
    return { patch: `// draft ${this.memory.drafts} (loop iteration ${ctx.iteration})\n// ${code}`, attempts: this.memory.drafts };
  }
}

/** Runs the tests on the patch (a fake CI: the second draft passes) and rates the change's risk. */
@injectable()
export class Validate extends Agent {
  constructor(@inject(LLM) private readonly llm: LlmClient) {
    super();
  }

  // Nothing to test without files: the step is skipped, and the skip is recorded.
  @Step({ retries: 2, timeoutMs: 60_000, when: (s: ReviewState) => (s.files?.length ?? 0) > 0 })
  async runTests(ctx: Ctx) {
    const testsPass = (ctx.state.attempts ?? 0) >= 2;
    const testReport = await this.llm.complete(`Report on the tests of ${ctx.state.patch} (${testsPass ? 'all passed' : '1 failed: empty refund batch'}).`, llmCall(ctx));
    const risk = (ctx.state.files ?? []).some((f) => f.startsWith('src/auth/')) ? 'high' : 'low';
    return { testsPass, testReport, risk } as const;
  }
}

/** branch[high], first: a security review of the patch. */
@injectable()
export class SecurityReview extends Agent {
  constructor(@inject(LLM) private readonly llm: LlmClient) {
    super();
  }

  @Step({ retries: 2, timeoutMs: 60_000 })
  async review(ctx: Ctx) {
    const securityReview = await this.llm.complete(`Security review of ${ctx.state.patch}`, llmCall(ctx));
    return { securityReview, securityVerdict: 'approve-with-notes' as const, findings: [`security: ${securityReview}`] };
  }
}

/** branch[high], second: tells the owners; pages on-call only when the review blocks the change. */
@injectable()
export class Escalate extends Agent {
  constructor(@inject(LLM) private readonly llm: LlmClient) {
    super();
  }

  @Step({ retries: 2, timeoutMs: 60_000 })
  async notifyOwners(ctx: Ctx) {
    const escalation = await this.llm.complete(`Tell the owners of ${ctx.state.repo}: ${ctx.state.securityReview}`, llmCall(ctx));
    return { escalation };
  }

  @Step({ timeoutMs: 60_000, when: (s: ReviewState) => s.securityVerdict === 'block' })
  async pageOnCall(ctx: Ctx) {
    return { pagedOnCall: await this.llm.complete(`Page on-call about ${ctx.state.repo}`, llmCall(ctx)) };
  }
}

/** One item of `forEach(reviews)`: reviews `ctx.item` (a file); its output lands in `reviews[ctx.itemIndex]`. */
@injectable()
export class FileReviewer extends Agent {
  constructor(@inject(LLM) private readonly llm: LlmClient) {
    super();
  }

  @Step({ retries: 2, timeoutMs: 60_000 })
  async review(ctx: Ctx): Promise<FileReview> {
    const file = String(ctx.item);
    const comment = await this.llm.complete(`Review ${file} in ${ctx.state.patch}`, llmCall(ctx));
    return { file, verdict: comment.startsWith('Worth a second look') ? 'comment' : 'approve', comment };
  }
}

type ChildCtx = StepContext<CustomerReportState>;

/** Child pipeline, first: how the change affects this customer (the child's input is the customer). */
@injectable()
export class ImpactAnalyst extends Agent {
  constructor(@inject(LLM) private readonly llm: LlmClient) {
    super();
  }

  @Step({ retries: 2, timeoutMs: 60_000 })
  async assess(ctx: ChildCtx) {
    return { impact: await this.llm.complete(`Impact of the refund retry change on ${ctx.state.name} (${ctx.state.plan} plan).`, llmCall(ctx)) };
  }
}

/** Child pipeline, second: the customer-facing note. */
@injectable()
export class ReportWriter extends Agent {
  constructor(@inject(LLM) private readonly llm: LlmClient) {
    super();
  }

  @Step({ retries: 2, timeoutMs: 60_000 })
  async write(ctx: ChildCtx) {
    const text = await this.llm.complete(`Write ${ctx.state.name}'s change note from: ${ctx.state.impact}`, llmCall(ctx));
    return { report: `${ctx.state.name} (customer ${Number(ctx.itemIndex) + 1}): ${text}` };
  }
}

/** Writes the release notes and emails them: the team once, and each customer its own report. */
@injectable()
export class Publisher extends Agent {
  constructor(
    @inject(LLM) private readonly llm: LlmClient,
    @inject(Outbox) private readonly outbox: Outbox,
  ) {
    super();
  }

  // Not retried as a whole: each send is guarded on its own, and a failed send should surface.
  @Step({ timeoutMs: 60_000 })
  async publish(ctx: Ctx) {
    const s = ctx.state;
    const approved = (s.reviews ?? []).filter((r) => r.verdict === 'approve').length;
    const releaseNotes = await this.llm.complete(
      `Release notes for '${s.change}': ${approved}/${s.reviews?.length ?? 0} files approved, risk ${s.risk}, ${s.findings?.length ?? 0} findings.`,
      llmCall(ctx),
    );
    const deliveries = [{ to: `team@${s.repo.split('/')[0]}.dev`, ...(await this.outbox.send(`team@${s.repo.split('/')[0]}.dev`, `Reviewed: ${s.change}`, releaseNotes)) }];
    for (const report of s.reports ?? []) {
      const to = `${report.name.toLowerCase()}@customers.example.com`;
      deliveries.push({ to, ...(await this.outbox.send(to, `What '${s.change}' means for ${report.name}`, report.report ?? '')) });
    }
    return { releaseNotes, deliveries };
  }
}
