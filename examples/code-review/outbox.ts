import { appendFileSync, existsSync, readFileSync } from 'node:fs';
import { inject, injectable, type ServiceIdentifier } from 'inversify';
import { SideEffect, currentOperation } from 'waypoint-durable';

/** Where the fake mail provider keeps its outbox. */
export interface OutboxConfig {
  outboxPath: string;
}

/** Inversify identifier of the outbox's configuration. */
export const OUTBOX_CONFIG: ServiceIdentifier<OutboxConfig> = Symbol.for('code-review:OutboxConfig');

/** One line of the outbox: `deduplicated` calls carried a key the provider had already delivered. */
export interface OutboxEntry {
  status: 'delivered' | 'deduplicated';
  idempotencyKey: string;
  messageId: string;
  runId: string;
  to: string;
  subject: string;
  pid: number;
}

/**
 * Sends an email. `send` is a `@SideEffect`: a committed send is never run again, however often the run
 * is resumed, and each call in a step gets its own key (by call ordinal), so a step may send several.
 * The provider (a JSON-lines file) also honours the key, which covers a crash between the send and its
 * record.
 *
 * @example
 * const { messageId } = await outbox.send('team@acme.dev', 'PR #481 reviewed', notes);
 */
@injectable()
export class Outbox {
  constructor(@inject(OUTBOX_CONFIG) private readonly config: OutboxConfig) {}

  @SideEffect({ name: 'send-email' })
  send(to: string, subject: string, _body: string): Promise<{ messageId: string }> {
    const { key, runId } = currentOperation();
    const already = readOutbox(this.config.outboxPath).find((e) => e.idempotencyKey === key && e.status === 'delivered');
    const messageId = already?.messageId ?? `<${key.slice(0, 16)}@mail.example.com>`;
    const entry: OutboxEntry = { status: already ? 'deduplicated' : 'delivered', idempotencyKey: key, messageId, runId, to, subject, pid: process.pid };
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
