import { createHash } from 'node:crypto';
import type { Redis } from 'ioredis';
import { scriptSource, type ScriptName } from './scripts';

/**
 * A change notice in the store's journal stream: which run changed, and what a replica cannot infer
 * from the run's current state alone. Field names are short: there is one entry per write.
 *
 * - `r`: run id. `k`: 'u' (the run, its steps or operations changed) or 'd' (the run was deleted).
 * - `t`: steps from this sequence on were dropped (truncation). `c`: steps up to this sequence were
 *   folded into a base row (retention). `o`: this operation record changed.
 * - `p`: payloads of steps from this sequence on may have been rewritten in place (re-encryption), so
 *   those rows are copied again. `a`: '1' when operations of the run may have been rewritten that way.
 */
export interface JournalEntry {
  r: string;
  k: 'u' | 'd';
  t?: number;
  c?: number;
  o?: string;
  p?: number;
  a?: 1;
}

/** The entry as XADD field/value arguments. */
export function journalFields(entry: JournalEntry): string[] {
  const fields: string[] = [];
  for (const [field, value] of Object.entries(entry)) if (value !== undefined) fields.push(field, String(value));
  return fields;
}

/** Parses XREADGROUP / XAUTOCLAIM field arrays back into an entry (unknown fields ignored). */
export function parseJournalEntry(flat: readonly string[]): JournalEntry {
  const raw: Record<string, string> = {};
  for (let i = 0; i + 1 < flat.length; i += 2) raw[flat[i]] = flat[i + 1]!;
  return {
    r: raw.r ?? '',
    k: raw.k === 'd' ? 'd' : 'u',
    t: raw.t === undefined ? undefined : Number(raw.t),
    c: raw.c === undefined ? undefined : Number(raw.c),
    o: raw.o,
    p: raw.p === undefined ? undefined : Number(raw.p),
    a: raw.a === '1' ? 1 : undefined,
  };
}

const shas = new Map<string, string>();

/**
 * Runs one of the store's write scripts and appends `entry` to the journal stream in the same
 * MULTI/EXEC, so a change and its notice are applied together or not at all (and AOF records them as
 * one). The script is sent by SHA; if the server lost its script cache (SCRIPT FLUSH, a restart) the
 * whole transaction is sent again with the script text, so no change ever goes out without its notice.
 * A notice of a rejected write (the script answered 'FENCED') is harmless: replicas re-read the run.
 *
 * @example
 * const reply = await journaledScript(client, 'wp:journal', 'waypointAppendStep', args, { r: runId, k: 'u' });
 */
export async function journaledScript(client: Redis, stream: string, name: ScriptName, args: (string | number)[], entry: JournalEntry): Promise<unknown> {
  const { lua, keys } = scriptSource(name);
  let sha = shas.get(name);
  if (!sha) shas.set(name, (sha = createHash('sha1').update(lua).digest('hex')));
  for (const byText of [false, true]) {
    const tx = client.multi();
    if (byText) tx.eval(lua, keys, ...args);
    else tx.evalsha(sha, keys, ...args);
    tx.xadd(stream, '*', ...journalFields(entry));
    const replies = (await tx.exec()) ?? [];
    // plain Error: a Redis protocol invariant; the store wraps it as the cause of STORE_UNAVAILABLE.
    const [scriptError, value] = replies[0] ?? [new Error('MULTI returned no reply for the script'), null];
    if (scriptError && !byText && /NOSCRIPT/.test(scriptError.message)) continue;
    if (scriptError) throw scriptError;
    if (replies[1]?.[0]) throw replies[1][0];
    return value;
  }
  // plain Error: a Redis protocol invariant; the store wraps it as the cause of STORE_UNAVAILABLE.
  throw new Error(`script ${name} could not be run`);
}
