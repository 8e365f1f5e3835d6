import { appendFileSync, existsSync, readFileSync } from 'node:fs';
import { inject, injectable, type ServiceIdentifier } from 'inversify';
import { SideEffect, currentOperation } from 'waypoint-durable';

/** Where the fake e-signature provider keeps the envelopes it was asked to send. */
export interface ESignConfig {
  outboxPath: string;
}

export const ESIGN_CONFIG: ServiceIdentifier<ESignConfig> = Symbol.for('approval-workflow:ESignConfig');

/** One request that reached the provider; a repeated idempotency key is answered, not sent again. */
export interface EnvelopeRequest {
  status: 'sent' | 'deduplicated';
  idempotencyKey: string;
  envelopeId: string;
  runId: string;
  contractId: string;
  to: string;
  pid: number;
}

/**
 * Sends a contract for signature: an external write, so a `@SideEffect`. Waypoint records it in the
 * committed-operations log and never sends a committed envelope again; the provider (a JSON-lines file
 * here) also honours the idempotency key, as real ones do.
 *
 * @example
 * const { envelopeId } = await esign.send('VND-42', 'legal@vendor.example');
 */
@injectable()
export class ESignService {
  constructor(@inject(ESIGN_CONFIG) private readonly config: ESignConfig) {}

  @SideEffect({ name: 'send-envelope' })
  send(contractId: string, to: string): Promise<{ envelopeId: string }> {
    const { key, runId } = currentOperation();
    const earlier = readEnvelopes(this.config.outboxPath).find((e) => e.idempotencyKey === key && e.status === 'sent');
    const envelopeId = earlier?.envelopeId ?? `env-${key.slice(0, 10)}`;
    const request: EnvelopeRequest = { status: earlier ? 'deduplicated' : 'sent', idempotencyKey: key, envelopeId, runId, contractId, to, pid: process.pid };
    appendFileSync(this.config.outboxPath, JSON.stringify(request) + '\n');
    return Promise.resolve({ envelopeId });
  }
}

/**
 * Reads the provider's outbox; a missing file is empty.
 *
 * @example
 * const sent = readEnvelopes(path).filter((e) => e.status === 'sent');
 */
export function readEnvelopes(path: string): EnvelopeRequest[] {
  if (!existsSync(path)) return [];
  return readFileSync(path, 'utf8')
    .split('\n')
    .filter((line) => line.endsWith('}'))
    .map((line) => JSON.parse(line) as EnvelopeRequest);
}
