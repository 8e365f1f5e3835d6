import { StreamLimitError } from '../../contract/errors';
import { serialize } from '../state/serializer';

/**
 * The stored text of a part `ctx.emit` was given: the runtime's serialization (core/state/serializer.ts),
 * so a part is plain JSON when it is JSON data (object keys sorted) and a Date, Map, BigInt, ... comes back
 * as itself through `deserialize`, as in step outputs. A value that cannot be stored (a function, a class
 * instance, a cycle) throws `SerializationError` naming its path; a text over `maxPartBytes` bytes of UTF-8
 * throws `StreamLimitError`.
 *
 * @example
 * encodePart({ delta: 'Hel' }, 'q3-aapl', 'Research/gather', 65_536); // '{"delta":"Hel"}'
 */
export function encodePart(part: unknown, runId: string, step: string, maxPartBytes: number): string {
  const text = serialize(part, { runId, step, what: 'emitted part' });
  // UTF-8 takes at least one byte and at most three per UTF-16 unit: a short text is counted without a pass over it.
  if (text.length * 3 > maxPartBytes) {
    const bytes = Buffer.byteLength(text, 'utf8');
    if (bytes > maxPartBytes) throw new StreamLimitError(runId, step, 'part-bytes', bytes, maxPartBytes);
  }
  return text;
}
