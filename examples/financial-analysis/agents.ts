import { inject, injectable } from 'inversify';
import { Agent, Step, type StepContext } from 'waypoint-durable';
import { LLM, llmCall, type LlmClient } from './llm';
import { Mailer } from './mailer';
import type { AnalysisState, Facts, Metrics } from './state';

type Ctx = StepContext<AnalysisState>;

/** What the research agent keeps between its own steps. */
export interface ResearchMemory {
  queries: string[];
  notes: string[];
}

/**
 * Finds sources, extracts the key figures and summarizes. Its running notes live in agent memory, not in
 * the shared state: after a crash they come back from the checkpoint, so the summary prompt (and answer)
 * are the same as in an uninterrupted run.
 */
@injectable()
export class ResearchAgent extends Agent<ResearchMemory> {
  override memory: ResearchMemory = { queries: [], notes: [] };

  constructor(@inject(LLM) private readonly llm: LlmClient) {
    super();
  }

  @Step({ retries: 2, timeoutMs: 60_000 })
  async gatherSources(ctx: Ctx) {
    const { ticker, quarter } = ctx.state;
    const text = await this.llm.complete(`List the primary sources for ${ticker}'s ${quarter} earnings analysis.`, llmCall(ctx));
    const sources = text
      .split('\n')
      .map((line) => line.replace(/^- /, '').trim())
      .filter(Boolean);
    this.memory.queries.push(`sources ${ticker} ${quarter}`);
    this.memory.notes.push(`${sources.length} sources, led by the ${sources[0]}`);
    return { sources };
  }

  @Step({ retries: 2, timeoutMs: 60_000 })
  async extractFacts(ctx: Ctx) {
    const { ticker, quarter, sources = [] } = ctx.state;
    const text = await this.llm.complete(`Extract the key figures for ${ticker} ${quarter} from: ${sources.join('; ')}. Answer as JSON.`, llmCall(ctx));
    const facts = JSON.parse(text) as Facts;
    this.memory.queries.push(`figures ${ticker} ${quarter}`);
    this.memory.notes.push(`revenue $${facts.revenueBn}bn at ${facts.grossMarginPct}% gross margin, EPS ${facts.eps}`);
    return { facts };
  }

  @Step({ timeoutMs: 60_000 })
  async summarize(ctx: Ctx) {
    const summary = await this.llm.complete(`Summarize ${ctx.state.ticker} research notes: ${this.memory.notes.join(' | ')}`, llmCall(ctx));
    return { researchSummary: summary };
  }
}

/** What the code-generation agent remembers: the assumptions baked into the model it wrote. */
export interface CodeGenMemory {
  assumptions: string[];
}

/** Writes a small valuation model, "runs" it, and checks how sensitive the result is. */
@injectable()
export class CodeGenAgent extends Agent<CodeGenMemory> {
  override memory: CodeGenMemory = { assumptions: [] };

  constructor(@inject(LLM) private readonly llm: LlmClient) {
    super();
  }

  @Step({ retries: 2, timeoutMs: 60_000 })
  async writeModel(ctx: Ctx) {
    const { ticker, facts } = ctx.state;
    const code = await this.llm.complete(`Write a TypeScript valuation model for ${ticker} given ${JSON.stringify(facts)}.`, llmCall(ctx));
    const growth = /growth = ([\d.]+)/.exec(code)?.[1] ?? 'unknown';
    this.memory.assumptions.push(`growth ${growth}`);
    return { modelCode: code };
  }

  @Step({ retries: 2, timeoutMs: 60_000 })
  async runModel(ctx: Ctx) {
    const { ticker, modelCode = '' } = ctx.state;
    const text = await this.llm.complete(`Run this model for ${ticker} and report the metrics. Answer as JSON.\n${modelCode}`, llmCall(ctx));
    const metrics = JSON.parse(text) as Metrics;
    this.memory.assumptions.push(`pe ${metrics.peRatio}`);
    return { metrics };
  }

  @Step({ timeoutMs: 60_000 })
  async sensitivity(ctx: Ctx) {
    const prompt = `Explain how sensitive the ${ctx.state.ticker} fair value of ${ctx.state.metrics?.fairValue} is to: ${this.memory.assumptions.join(', ')}`;
    return { sensitivity: await this.llm.complete(prompt, llmCall(ctx)) };
  }
}

/** What the validation agent collects before it decides. */
export interface ValidationMemory {
  findings: string[];
}

/** Cross-checks the figures, reviews the model, and gives a verdict from everything it found. */
@injectable()
export class ValidationAgent extends Agent<ValidationMemory> {
  override memory: ValidationMemory = { findings: [] };

  constructor(@inject(LLM) private readonly llm: LlmClient) {
    super();
  }

  @Step({ retries: 2, timeoutMs: 60_000 })
  async checkFacts(ctx: Ctx) {
    const { ticker, facts, sources = [] } = ctx.state;
    const finding = await this.llm.complete(`Cross-check ${ticker} figures ${JSON.stringify(facts)} against ${sources.length} sources.`, llmCall(ctx));
    this.memory.findings.push(`figures: ${finding}`);
    return { findings: [...this.memory.findings] };
  }

  @Step({ retries: 2, timeoutMs: 60_000 })
  async reviewModel(ctx: Ctx) {
    const finding = await this.llm.complete(`Review the ${ctx.state.ticker} model for errors:\n${ctx.state.modelCode}`, llmCall(ctx));
    this.memory.findings.push(`model: ${finding}`);
    return { findings: [...this.memory.findings] };
  }

  @Step({ timeoutMs: 60_000 })
  async decideVerdict(ctx: Ctx) {
    const text = await this.llm.complete(`Give a verdict on the ${ctx.state.ticker} analysis given: ${this.memory.findings.join(' / ')}. Answer as JSON.`, llmCall(ctx));
    const { verdict, confidence } = JSON.parse(text) as Pick<AnalysisState, 'verdict' | 'confidence'>;
    return { verdict, confidence };
  }
}

/** What the reporting agent remembers: how many drafts it wrote. */
export interface ReportingMemory {
  drafts: number;
}

/** Writes the report and emails it, once, however often the run is resumed. */
@injectable()
export class ReportingAgent extends Agent<ReportingMemory> {
  override memory: ReportingMemory = { drafts: 0 };

  constructor(
    @inject(LLM) private readonly llm: LlmClient,
    @inject(Mailer) private readonly mailer: Mailer,
  ) {
    super();
  }

  @Step({ retries: 2, timeoutMs: 60_000 })
  async draftReport(ctx: Ctx) {
    const s = ctx.state;
    const outlook = await this.llm.complete(`Write the outlook paragraph of the ${s.ticker} ${s.quarter} report. Verdict: ${s.verdict}.`, llmCall(ctx));
    this.memory.drafts += 1;
    const report = [
      `# ${s.ticker} ${s.quarter} analysis`,
      s.researchSummary,
      `Fair value ${s.metrics?.fairValue} (P/E ${s.metrics?.peRatio}, revenue growth ${s.metrics?.revenueGrowthPct}%).`,
      `Validation: ${s.verdict} at ${s.confidence}% confidence; ${s.findings?.length ?? 0} findings.`,
      outlook,
    ].join('\n\n');
    return { report };
  }

  // Not retried as a whole: the send inside is guarded on its own, and a failed send should surface.
  @Step({ timeoutMs: 60_000 })
  async deliverReport(ctx: Ctx) {
    const { ticker, quarter, recipients, report = '' } = ctx.state;
    const line = await this.llm.complete(`Write an email subject for the ${ticker} ${quarter} report.`, llmCall(ctx));
    const subject = `${ticker} ${quarter}: ${line.slice(0, 60)}`;
    const { messageId } = await this.mailer.send(recipients, subject, report);
    return { delivery: { messageId, to: [...recipients], subject } };
  }
}
