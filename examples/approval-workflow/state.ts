import { IsArray, IsIn, IsNumber, IsObject, IsOptional, IsString, Matches, Min, MinLength } from 'class-validator';

/** Key terms the intake step reads from the contract. */
export interface Terms {
  clauseCount: number;
  renewal: 'auto' | 'manual';
  liabilityCapUsd: number | null;
}

/** A person's answer, delivered with `waypoint.signal(runId, 'legal-approval', decision)`. */
export interface Decision {
  approved: boolean;
  by: string;
  note?: string;
}

/** What the e-signature provider answered. */
export interface Envelope {
  envelopeId: string;
  sentTo: string;
}

/**
 * Shared state of the contract-approval pipeline. The input sets the contract; each step adds its
 * part. Validated on input, after every step and on every load.
 *
 * @example
 * await waypoint.run(ContractApproval, { runId: 'contract-42', input: DEMO_CONTRACT });
 */
export class ContractState {
  @Matches(/^[A-Z]+-\d+$/, { message: 'contractId must look like VND-42' })
  contractId!: string;

  @IsString() @MinLength(1) vendor!: string;
  @IsString() @MinLength(3) vendorEmail!: string;
  @IsNumber() @Min(0) amountUsd!: number;
  @IsArray() @IsString({ each: true }) clauses!: string[];

  // IntakeAgent
  @IsOptional() @IsObject() terms?: Terms;
  // ReviewAgent
  @IsOptional() @IsIn(['low', 'medium', 'high']) risk?: 'low' | 'medium' | 'high';
  @IsOptional() @IsArray() @IsString({ each: true }) findings?: string[];
  // ApprovalAgent
  @IsOptional() @IsObject() decision?: Decision;
  // SigningAgent
  @IsOptional() @IsObject() envelope?: Envelope;
  @IsOptional() @IsIn(['sent-for-signature', 'returned-to-vendor']) outcome?: 'sent-for-signature' | 'returned-to-vendor';
}
