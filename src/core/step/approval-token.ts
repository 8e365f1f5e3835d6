import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import type { CheckpointStore } from '../../contract/checkpoint-store';
import { RunNotFoundError, WaypointError } from '../../contract/errors';
import { checkSignalName } from '../../contract/signal-rules';
import { checkRunId } from '../run/run-id';
import { serialize } from '../state/serializer';

/*
 * Approval links (issue 38): a token an email can carry that delivers one signal to one run, once.
 * The token is `<body>.<mac>`, both base64url: the body is JSON naming the run (and the time it was
 * created, so a later run reusing the id is another run), the signal, its payload and the expiry; the mac
 * is HMAC-SHA256 over the body under the signing key. Nothing about the decision lives in the link: the
 * single use is the signal delivery itself (the first delivery of a signal wins, recorded with the run).
 */

/** Options of `waypoint.approvalLink`. */
export interface ApprovalLinkOptions {
  /** How long the link works: milliseconds, or a duration such as '30m', '48h', '7d'. */
  expiresIn: number | string;
  /** The signal's payload (JSON-serializable, within the signal payload limit); signed into the token. */
  payload?: unknown;
}

/** What a verified token says. */
export interface ApprovalClaim {
  runId: string;
  signal: string;
  payload: unknown;
  expiresAt: Date;
}

interface TokenBody {
  v: 1;
  r: string;
  c: string;
  s: string;
  p?: unknown;
  e: number;
  n: string;
}

const LONGEST_MS = 90 * 24 * 3600_000;
const UNITS: Record<string, number> = { s: 1000, m: 60_000, h: 3600_000, d: 24 * 3600_000 };

/** `expiresIn` in milliseconds: a positive number, or `<n>s|m|h|d`, at most 90 days. */
export function expiryMs(expiresIn: number | string): number {
  const match = typeof expiresIn === 'string' ? /^(\d{1,6})(s|m|h|d)$/.exec(expiresIn.trim()) : null;
  const ms = typeof expiresIn === 'number' ? expiresIn : match ? Number(match[1]) * UNITS[match[2]] : NaN;
  if (!(Number.isFinite(ms) && ms > 0 && ms <= LONGEST_MS)) {
    throw new WaypointError(
      'INVALID_ARGUMENT',
      `expiresIn of an approval link must be a positive duration of at most 90 days (ms, or e.g. '48h'), got ${JSON.stringify(expiresIn)}.`,
    );
  }
  return ms;
}

/**
 * Signs an approval token for signal `signal` of run `runId`, which must exist and be open.
 *
 * @example
 * const token = await signApprovalToken(store, key, 'invoice-7', 'approval', { expiresIn: '48h', payload: { approved: true } });
 */
export async function signApprovalToken(store: CheckpointStore, key: Buffer, runId: string, signal: string, options: ApprovalLinkOptions, now = Date.now()): Promise<string> {
  checkRunId(runId);
  checkSignalName(signal, { runId });
  const ms = expiryMs(options?.expiresIn);
  if (options.payload !== undefined) serialize(options.payload, { runId, what: `payload of the approval link for signal '${signal}'` });
  const run = await store.getRun(runId);
  if (!run) throw new RunNotFoundError(runId);
  const body: TokenBody = { v: 1, r: runId, c: run.createdAt.toISOString(), s: signal, e: Math.floor((now + ms) / 1000), n: randomBytes(9).toString('base64url') };
  if (options.payload !== undefined) body.p = options.payload;
  const text = Buffer.from(JSON.stringify(body), 'utf8').toString('base64url');
  return `${text}.${mac(key, text)}`;
}

/** Why a token delivers nothing: `invalid` (tampered, malformed, another key: 403), `expired` (410). */
export type TokenProblem = 'invalid' | 'expired';

/**
 * Checks a token's signature and expiry (not yet the run: see `claimMatchesRun`).
 *
 * @example
 * const checked = verifyApprovalToken(key, token); if ('problem' in checked) return refuse(checked.problem);
 */
export function verifyApprovalToken(key: Buffer, token: string, now = Date.now()): { claim: ApprovalClaim; created: string } | { problem: TokenProblem } {
  const parts = token.split('.');
  if (parts.length !== 2 || parts[0].length === 0 || parts[0].length > 64 * 1024) return { problem: 'invalid' };
  const expected = Buffer.from(mac(key, parts[0]), 'utf8');
  const given = Buffer.from(parts[1], 'utf8');
  if (expected.length !== given.length || !timingSafeEqual(expected, given)) return { problem: 'invalid' };
  let body: TokenBody;
  try {
    body = JSON.parse(Buffer.from(parts[0], 'base64url').toString('utf8')) as TokenBody;
  } catch {
    return { problem: 'invalid' };
  }
  if (body?.v !== 1 || typeof body.r !== 'string' || typeof body.s !== 'string' || typeof body.e !== 'number' || typeof body.c !== 'string') return { problem: 'invalid' };
  if (body.e * 1000 <= now) return { problem: 'expired' };
  return { claim: { runId: body.r, signal: body.s, payload: body.p, expiresAt: new Date(body.e * 1000) }, created: body.c };
}

function mac(key: Buffer, text: string): string {
  return createHmac('sha256', key).update('waypoint-approval-v1.').update(text).digest('base64url');
}
