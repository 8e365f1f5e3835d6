import { IsArray, IsBoolean, IsIn, IsInt, IsOptional, IsString } from 'class-validator';
import { Reducer } from 'waypoint-durable';

/** A customer whose integration the change may affect: one child run of `CustomerReport` each. */
export interface Customer {
  name: string;
  plan: 'free' | 'pro' | 'enterprise';
}

/** What one `FileReviewer` item returns (it lands in `reviews[i]`, in file order). */
export interface FileReview {
  file: string;
  verdict: 'approve' | 'comment';
  comment: string;
}

/** Where the emails went (the outbox's answers). */
export interface Delivery {
  to: string;
  messageId: string;
}

const append = (current: string[] = [], update: string[] = []) => [...current, ...update];

/**
 * The shared state of the code-review pipeline. The input sets `repo` and `change`; the planner adds the
 * files and the customers; the research branches add findings (merged by the `@Reducer`, so every branch
 * may append); the loop, the branch and the two forEach fill in the rest.
 *
 * @example
 * await waypoint.run(CodeReview, { runId: 'pr-481', input: { repo: 'acme/payments', change: 'retry failed refunds' } });
 */
export class ReviewState {
  @IsString() repo!: string;
  @IsString() change!: string;

  // Planner
  @IsOptional() @IsArray() @IsString({ each: true }) files?: string[];
  @IsOptional() @IsArray() customers?: Customer[];

  // parallel research: every branch appends findings; the rest is set by one branch each
  @IsOptional() @IsArray() @Reducer(append) findings?: string[];
  @IsOptional() @IsString() webNotes?: string;
  @IsOptional() @IsString() docsNotes?: string;
  @IsOptional() @IsString() summary?: string;
  @IsOptional() @IsString() apiNotes?: string;

  // loop(CodeGen, Validate)
  @IsOptional() @IsString() patch?: string;
  @IsOptional() @IsInt() attempts?: number;
  @IsOptional() @IsBoolean() testsPass?: boolean;
  @IsOptional() @IsString() testReport?: string;
  @IsOptional() @IsIn(['high', 'low']) risk?: 'high' | 'low';

  // branch[high]
  @IsOptional() @IsString() securityReview?: string;
  @IsOptional() @IsIn(['approve-with-notes', 'block']) securityVerdict?: 'approve-with-notes' | 'block';
  @IsOptional() @IsString() escalation?: string;
  @IsOptional() @IsString() pagedOnCall?: string;

  // forEach(reviews) and forEach(reports)
  @IsOptional() @IsArray() reviews?: FileReview[];
  @IsOptional() @IsArray() reports?: CustomerReportState[];

  // Publisher
  @IsOptional() @IsString() releaseNotes?: string;
  @IsOptional() @IsArray() deliveries?: Delivery[];
}

/**
 * The state of one `CustomerReport` child run: its input is the customer (the forEach item), its agents
 * add the impact and the report.
 */
export class CustomerReportState {
  @IsString() name!: string;
  @IsIn(['free', 'pro', 'enterprise']) plan!: Customer['plan'];
  @IsOptional() @IsString() impact?: string;
  @IsOptional() @IsString() report?: string;
}
