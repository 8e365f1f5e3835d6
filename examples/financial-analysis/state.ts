import { IsArray, IsEmail, IsIn, IsInt, IsObject, IsOptional, IsString, Matches, Max, Min } from 'class-validator';

/** Figures the research agent extracts from its sources. */
export interface Facts {
  revenueBn: number;
  grossMarginPct: number;
  freeCashFlowBn: number;
  eps: number;
}

/** What the code-generation agent's model computes from the facts. */
export interface Metrics {
  revenueGrowthPct: number;
  fcfMarginPct: number;
  peRatio: number;
  fairValue: number;
}

/** Where the report went (the mailer's answer). */
export interface Delivery {
  messageId: string;
  to: string[];
  subject: string;
}

/**
 * The shared state of the financial-analysis pipeline. The input sets `ticker`, `quarter` and
 * `recipients`; each agent's steps fill in their part. Waypoint validates it with these class-validator
 * rules on input, after every step and on every load, so a step that produces a bad value fails before
 * anything is checkpointed.
 *
 * @example
 * await waypoint.run(FinancialAnalysis, { runId: 'q3-aapl', input: { ticker: 'AAPL', quarter: 'Q3-2026' } });
 */
export class AnalysisState {
  @Matches(/^[A-Z]{1,5}$/, { message: 'ticker must be 1-5 upper-case letters, e.g. AAPL' })
  ticker!: string;

  @Matches(/^Q[1-4]-\d{4}$/, { message: 'quarter must look like Q3-2026' })
  quarter = 'Q3-2026';

  @IsArray()
  @IsEmail({}, { each: true })
  recipients: string[] = ['cfo@example.com'];

  // ResearchAgent
  @IsOptional() @IsArray() @IsString({ each: true }) sources?: string[];
  @IsOptional() @IsObject() facts?: Facts;
  @IsOptional() @IsString() researchSummary?: string;

  // CodeGenAgent
  @IsOptional() @IsString() modelCode?: string;
  @IsOptional() @IsObject() metrics?: Metrics;
  @IsOptional() @IsString() sensitivity?: string;

  // ValidationAgent
  @IsOptional() @IsArray() @IsString({ each: true }) findings?: string[];
  @IsOptional() @IsIn(['pass', 'pass-with-notes', 'fail']) verdict?: 'pass' | 'pass-with-notes' | 'fail';
  @IsOptional() @IsInt() @Min(0) @Max(100) confidence?: number;

  // ReportingAgent
  @IsOptional() @IsString() report?: string;
  @IsOptional() @IsObject() delivery?: Delivery;
}
