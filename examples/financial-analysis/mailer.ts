import { createHash } from 'node:crypto';
import { appendFileSync, existsSync, readFileSync } from 'node:fs';
import { inject, injectable, type ServiceIdentifier } from 'inversify';
import { SideEffect, currentOperation } from 'waypoint-durable';

/** Where the fake mail provider keeps its outbox. */
export interface MailerConfig {
  outboxPath: string;
}

/** Inversify identifier of the mailer's configuration. */
export const MAILER_CONFIG: ServiceIdentifier<MailerConfig> = Symbol.for('financial-analysis:MailerConfig');

/**
 * One line of the outbox: every call that reached the provider. `deduplicated` calls carried an
 * idempotency key the provider had already delivered, so no second email went out.
 */
export interface OutboxEntry {
  status: 'delivered' | 'deduplicated';
  idempotencyKey: string;
  messageId: string;
  runId: string;
  to: string[];
  subject: string;
  bodySha256: string;
  pid: number;
}

/**
 * Sends the finished report by email. `send` is an external write, so it is a `@SideEffect`: Waypoint
 * records it in the committed-operations log and never runs a committed send again, however often the
 * run is resumed. The provider (a JSON-lines outbox file here) honours idempotency keys like a real one
 * does, which covers the one gap a log cannot: a crash after the email left but before it was recorded.
 *
 * @example
 * const { messageId } = await mailer.send(['cfo@example.com'], 'AAPL Q3-2026', report);
 */
@injectable()
export class Mailer {
  constructor(@inject(MAILER_CONFIG) private readonly config: MailerConfig) {}

  @SideEffect({ name: 'send-report' })
  send(to: string[], subject: string, body: string): Promise<{ messageId: string }> {
    // The operation key is deterministic per (run, agent, step, operation, call ordinal): a re-run
    // after a crash presents the same key, and the provider answers with the original message.
    const { key, runId } = currentOperation();
    const already = readOutbox(this.config.outboxPath).find((e) => e.idempotencyKey === key && e.status === 'delivered');
    const messageId = already?.messageId ?? `<${key.slice(0, 16)}@mail.example.com>`;
    const entry: OutboxEntry = {
      status: already ? 'deduplicated' : 'delivered',
      idempotencyKey: key,
      messageId,
      runId,
      to,
      subject,
      bodySha256: createHash('sha256').update(body).digest('hex'),
      pid: process.pid,
    };
    appendFileSync(this.config.outboxPath, JSON.stringify(entry) + '\n');
    return Promise.resolve({ messageId });
  }
}

/**
 * Reads the outbox; a missing file is an empty outbox.
 *
 * @example
 * const delivered = readOutbox(path).filter((e) => e.status === 'delivered');
 */
export function readOutbox(path: string): OutboxEntry[] {
  if (!existsSync(path)) return [];
  return readFileSync(path, 'utf8')
    .split('\n')
    .filter((line) => line.endsWith('}'))
    .map((line) => JSON.parse(line) as OutboxEntry);
}
