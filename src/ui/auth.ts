import { createHmac, timingSafeEqual } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import { isIP } from 'node:net';
import { UiConfigError } from './errors';

/** Name of the cookie a browser gets after presenting the token once. */
export const SESSION_COOKIE = 'waypoint_ui_session';
const MIN_TOKEN_LENGTH = 16;

/** True for addresses only this machine can reach. */
export function isLoopback(host: string): boolean {
  const bare = host.replace(/^\[|\]$/g, '');
  return bare === 'localhost' || bare === '::1' || (isIP(bare) === 4 && bare.startsWith('127.'));
}

/**
 * The bearer token in force: the option, else WAYPOINT_UI_TOKEN. Required when binding anything but
 * loopback, since the API shows run state and (with actions) can change runs.
 */
export function resolveToken(option: string | undefined, host: string, env: NodeJS.ProcessEnv = process.env): string | undefined {
  const token = option ?? (env.WAYPOINT_UI_TOKEN || undefined);
  if (token !== undefined && token.length < MIN_TOKEN_LENGTH) {
    throw new UiConfigError(`The UI token has ${token.length} characters; use at least ${MIN_TOKEN_LENGTH} (e.g. \`openssl rand -hex 24\`).`);
  }
  if (token === undefined && !isLoopback(host)) {
    throw new UiConfigError(
      `Binding the UI to '${host}' exposes run data beyond this machine; give a token (the \`token\` option, --token or WAYPOINT_UI_TOKEN), or bind to 127.0.0.1.`,
    );
  }
  return token;
}

/**
 * Checks requests against the token: `Authorization: Bearer <token>` (API clients) or the session
 * cookie a browser gets from `/?token=...` or the login form. Without a token every request passes the
 * token check, and the Host check below keeps other web sites (DNS rebinding) out of a loopback server.
 */
export class Gate {
  private readonly session: string | undefined;

  constructor(
    private readonly token: string | undefined,
    private readonly allowedHosts: ReadonlySet<string> | undefined,
  ) {
    // The cookie carries a value derived from the token, not the token itself.
    this.session = token === undefined ? undefined : createHmac('sha256', token).update('waypoint-ui-session').digest('hex');
  }

  get enabled(): boolean {
    return this.token !== undefined;
  }

  /** Host header acceptable? Only checked for a loopback bind without a token. */
  hostAllowed(req: IncomingMessage): boolean {
    if (this.allowedHosts === undefined) return true;
    return this.allowedHosts.has((req.headers.host ?? '').toLowerCase());
  }

  /** A cross-site POST (an Origin other than this server) is refused even with a valid cookie. */
  originAllowed(req: IncomingMessage): boolean {
    const origin = req.headers.origin;
    if (origin === undefined || origin === 'null') return origin === undefined;
    try {
      return new URL(origin).host.toLowerCase() === (req.headers.host ?? '').toLowerCase();
    } catch {
      return false;
    }
  }

  authorized(req: IncomingMessage): boolean {
    if (this.token === undefined) return true;
    const header = req.headers.authorization;
    if (header?.startsWith('Bearer ') && this.matches(header.slice(7).trim())) return true;
    const cookie = readCookie(req.headers.cookie, SESSION_COOKIE);
    return cookie !== undefined && equal(cookie, this.session!);
  }

  /** True when `candidate` is the token (constant time). */
  matches(candidate: string): boolean {
    return this.token !== undefined && equal(candidate, this.token);
  }

  /** Set-Cookie value for a browser that presented the token. */
  sessionCookie(): string {
    return `${SESSION_COOKIE}=${this.session}; HttpOnly; SameSite=Strict; Path=/`;
  }
}

/** Host headers a loopback server answers to: its own address and `localhost`, on its port. */
export function loopbackHosts(host: string, port: number): Set<string> {
  const bare = host.replace(/^\[|\]$/g, '');
  const names = new Set([bare.includes(':') ? `[${bare}]` : bare, 'localhost', '127.0.0.1', '[::1]']);
  return new Set([...names].map((name) => `${name}:${port}`.toLowerCase()));
}

function readCookie(header: string | undefined, name: string): string | undefined {
  for (const part of (header ?? '').split(';')) {
    const eq = part.indexOf('=');
    if (eq > 0 && part.slice(0, eq).trim() === name) return part.slice(eq + 1).trim();
  }
  return undefined;
}

function equal(a: string, b: string): boolean {
  // Compare digests so the comparison takes the same time whatever the lengths.
  const da = createHmac('sha256', 'waypoint-ui-compare').update(a).digest();
  const db = createHmac('sha256', 'waypoint-ui-compare').update(b).digest();
  return timingSafeEqual(da, db);
}
