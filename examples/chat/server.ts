import 'reflect-metadata';
import { randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import type { UIMessage } from 'ai';
import { Waypoint, sqliteStorage, type RunRecord } from 'waypoint-durable';
import { runUIMessage, runUIMessageStreamResponse, type WrappableModel } from 'waypoint-durable/ai';
import { createHttpHandler, toNodeListener } from 'waypoint-durable/http';
import { SupportChat, useChatServices, type TurnState } from './assistant';
import { approvePage, chatPage, pageScript } from './page-assets';

/**
 * The server of `npm run demo:chat`: the chat page, the chat routes `useChat` talks to, and Waypoint's
 * HTTP handler (mounted at /api/waypoint: the stop button's cancel, the approval link's approve). One
 * run per chat turn, id `<chatId>~<turn>`, stored with the browser session as its tenant, so a chat is
 * visible only to the session that started it. Runs go on when a page closes; a restarted server
 * resumes the turns its previous process left running.
 */

const SESSION_COOKIE = 'chat_session';
const CHAT_ID = /^[A-Za-z0-9_-]{1,64}$/;

export interface ChatServerOptions {
  /** Where the SQLite file, the signing key and the outbox live (kept across restarts). */
  dataDir: string;
  port?: number;
  model: WrappableModel;
  /** Lease of a run: how soon a restarted server takes over a turn its killed predecessor held. */
  leaseTtlMs?: number;
}

export interface ChatServer {
  url: string;
  waypoint: Waypoint;
  close(): Promise<void>;
}

/**
 * Starts the chat server and resumes the turns left running.
 *
 * @example
 * const server = await startChatServer({ dataDir: '.chat', port: 3000, model: mockModel() });
 */
export async function startChatServer(options: ChatServerOptions): Promise<ChatServer> {
  mkdirSync(options.dataDir, { recursive: true });
  const waypoint = await Waypoint.create({
    modules: [sqliteStorage({ path: join(options.dataDir, 'chat.db') })],
    pipelines: [SupportChat],
    hmacKey: signingKey(options.dataDir),
    leaseTtlMs: options.leaseTtlMs ?? 30_000,
  });
  const script = await pageScript();
  let base = '';
  useChatServices({
    model: options.model,
    outbox: join(options.dataDir, 'outbox.jsonl'),
    approvalUrl: async (runId) => `${base}/approve#${await waypoint.approvalLink(runId, 'approve', { expiresIn: 24 * 3600_000, payload: { approved: true } })}`,
  });
  const api = createHttpHandler({
    waypoint,
    pipelines: [SupportChat],
    basePath: '/api/waypoint',
    // The session cookie is the tenant; an approval link carries its own authority (a signed, single-use token).
    authorize: (request, { action }) => (action === 'approve' ? true : sessionOf(request.headers.get('cookie')) ? { tenant: sessionOf(request.headers.get('cookie'))! } : false),
  });
  const turns = new TurnRunner(waypoint, options.leaseTtlMs ?? 30_000);
  const listener = toNodeListener(async (request) => route(request, { waypoint, api, turns, script }));
  const server = createServer((req: IncomingMessage, res: ServerResponse) => listener(req, res));
  await new Promise<void>((resolve) => server.listen(options.port ?? 0, '127.0.0.1', resolve));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  await turns.resumeLeftRunning();
  return {
    url: base,
    waypoint,
    async close() {
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
      await turns.settled();
      await waypoint.close();
    },
  };
}

interface Ctx {
  waypoint: Waypoint;
  api: (request: Request) => Promise<Response>;
  turns: TurnRunner;
  script: string;
}

async function route(request: Request, ctx: Ctx): Promise<Response> {
  const url = new URL(request.url);
  const path = url.pathname;
  if (path.startsWith('/api/waypoint/')) return ctx.api(request);
  if (request.method === 'GET' && path === '/') return html(chatPage(), sessionOf(request.headers.get('cookie')) ? {} : { 'set-cookie': newSessionCookie() });
  if (request.method === 'GET' && path === '/approve') return html(approvePage());
  if (request.method === 'GET' && path === '/chat.js') return new Response(ctx.script, { headers: { 'content-type': 'text/javascript; charset=utf-8' } });
  const session = sessionOf(request.headers.get('cookie'));
  if (!session) return json(401, { error: { code: 'UNAUTHORIZED', message: 'No chat session: open the page first (it sets the session cookie).' } });
  const chat = /^\/api\/chat(?:\/([^/]+)(?:\/(stream|history))?)?$/.exec(path);
  if (!chat) return json(404, { error: { code: 'NOT_FOUND', message: `No route ${request.method} ${path}.` } });
  const [, chatId, sub] = chat;
  if (request.method === 'POST' && chatId === undefined) return postMessage(request, ctx, session);
  if (chatId === undefined || !CHAT_ID.test(chatId)) return json(400, { error: { code: 'BAD_CHAT_ID', message: 'A chat id is 1-64 letters, digits, - or _.' } });
  if (request.method === 'GET' && sub === 'history') return json(200, await history(ctx.waypoint, chatId, session));
  if (request.method === 'GET' && sub === 'stream') return reconnect(request, ctx.waypoint, chatId, session);
  return json(405, { error: { code: 'METHOD_NOT_ALLOWED', message: `${request.method} ${path} is not a route.` } });
}

/** useChat's POST: starts this turn's run (once: a repeated POST of the same turn gets the same run) and streams it. */
async function postMessage(request: Request, ctx: Ctx, session: string): Promise<Response> {
  // useChat sends the whole conversation; a demo chat has no business with more than 1 MB of it.
  const text = await request.text();
  if (text.length > 1_000_000) return json(413, { error: { code: 'BODY_TOO_LARGE', message: 'A chat request is at most 1 MB.' } });
  const body = parse<{ id?: unknown; messages?: UIMessage[] }>(text) ?? null;
  const chatId = typeof body?.id === 'string' && CHAT_ID.test(body.id) ? body.id : undefined;
  const messages = Array.isArray(body?.messages) ? body.messages.filter((m) => typeof m === 'object' && m !== null && Array.isArray(m.parts)) : [];
  const users = messages.filter((m) => m.role === 'user');
  const question = textOf(users.at(-1));
  if (!chatId || question === '' || question.length > 4000)
    return json(400, { error: { code: 'BAD_MESSAGE', message: 'Send { id, messages } with a last user message of 1-4000 characters.' } });
  const runId = `${chatId}~${users.length}`;
  const existing = await ctx.waypoint.store.getRun(runId);
  if (existing && tenantOf(existing) !== session) return json(404, { error: { code: 'RUN_NOT_FOUND', message: 'No such chat here.' } });
  if (!existing) {
    const history = messages.slice(0, -1).map((m) => ({ role: m.role === 'user' ? ('user' as const) : ('assistant' as const), text: textOf(m) }));
    const input: TurnState = { chatId, question, history };
    await ctx.waypoint.prepare(SupportChat, { runId, input }, { tenant: session });
    ctx.turns.start(runId, input);
  }
  return runUIMessageStreamResponse(ctx.waypoint, runId, { request });
}

/** useChat's reconnect (`resume: true` after a reload, or WaypointChatTransport after a cut): the chat's latest turn, if it is not over. */
async function reconnect(request: Request, waypoint: Waypoint, chatId: string, session: string): Promise<Response> {
  const runs = await turnsOf(waypoint, chatId, session);
  const last = runs.at(-1);
  const over = last && ['completed', 'failed', 'cancelled'].includes(last.status);
  // A finished turn is in the history already; only a continuation (Last-Event-ID) still wants its end.
  if (!last || (over && !request.headers.get('last-event-id'))) return new Response(null, { status: 204 });
  return runUIMessageStreamResponse(waypoint, last.runId, { request });
}

/** The chat as the page shows it after a reload: each turn's question and, once the turn is over, its answer. */
async function history(waypoint: Waypoint, chatId: string, session: string): Promise<{ messages: UIMessage[]; activeRunId: string | null }> {
  const messages: UIMessage[] = [];
  let activeRunId: string | null = null;
  for (const run of await turnsOf(waypoint, chatId, session)) {
    const input = parse<TurnState>(run.input);
    messages.push({ id: `${run.runId}:q`, role: 'user', parts: [{ type: 'text', text: input?.question ?? '' }] });
    if (['completed', 'failed', 'cancelled'].includes(run.status)) messages.push(await runUIMessage(waypoint, run.runId));
    else activeRunId = run.runId;
  }
  return { messages, activeRunId };
}

/** The runs of a chat, turn by turn, as long as they belong to this session. */
async function turnsOf(waypoint: Waypoint, chatId: string, session: string): Promise<RunRecord[]> {
  const runs: RunRecord[] = [];
  for (let turn = 1; ; turn++) {
    const run = await waypoint.store.getRun(`${chatId}~${turn}`);
    if (!run || tenantOf(run) !== session) return runs;
    runs.push(run);
  }
}

/** Runs turns in this process, and on start resumes those a killed predecessor left running (once its lease ran out). */
class TurnRunner {
  private readonly running = new Map<string, Promise<void>>();

  constructor(
    private readonly waypoint: Waypoint,
    private readonly leaseTtlMs: number,
  ) {}

  start(runId: string, input: TurnState): void {
    this.advance(runId, () => this.waypoint.run(SupportChat, { runId, input }));
  }

  async resumeLeftRunning(): Promise<void> {
    for (const run of await this.waypoint.list({ pipelineName: 'support-chat', status: ['running', 'paused'] })) {
      this.advance(run.runId, () => this.waypoint.resume(run.runId));
    }
  }

  async settled(): Promise<void> {
    await Promise.allSettled([...this.running.values()]);
  }

  private advance(runId: string, go: () => Promise<{ status: string }>): void {
    if (this.running.has(runId)) return;
    const attempt = async (): Promise<void> => {
      for (let tries = 0; ; tries++) {
        try {
          await go();
          return;
        } catch (error) {
          // A killed predecessor's lease still holds the run: wait for it to run out, then take over.
          if ((error as { code?: string }).code !== 'RUN_LOCKED' || tries > 20) throw error;
          await new Promise((resolve) => setTimeout(resolve, Math.min(this.leaseTtlMs / 4, 2_000)));
        }
      }
    };
    const done = attempt()
      .catch((error: unknown) => console.error(`chat turn ${runId} stopped:`, (error as Error).message))
      .finally(() => this.running.delete(runId));
    this.running.set(runId, done);
  }
}

/** The session a turn was started under (the handler's tenant, in the run's metadata). */
function tenantOf(run: RunRecord): string | undefined {
  const tenant = parse<Record<string, unknown>>(run.metadata)?.tenant;
  return typeof tenant === 'string' ? tenant : undefined;
}

function parse<T>(text: string): T | undefined {
  try {
    return JSON.parse(text) as T;
  } catch {
    return undefined;
  }
}

function textOf(message: UIMessage | undefined): string {
  // Parts come from the client: anything but a text part with a string is ignored.
  return (message?.parts ?? []).flatMap((p) => (p?.type === 'text' && typeof p.text === 'string' ? [p.text] : [])).join('');
}

function sessionOf(cookie: string | null): string | undefined {
  const match = new RegExp(`(?:^|;\\s*)${SESSION_COOKIE}=([A-Za-z0-9_-]{16,64})`).exec(cookie ?? '');
  return match?.[1];
}

function newSessionCookie(): string {
  return `${SESSION_COOKIE}=${randomBytes(18).toString('base64url')}; Path=/; HttpOnly; SameSite=Lax`;
}

/** The approval links' signing key: made once per data directory, so links outlive a restart. */
function signingKey(dataDir: string): Buffer {
  const file = join(dataDir, 'signing.key');
  if (!existsSync(file)) writeFileSync(file, randomBytes(32).toString('hex'), { mode: 0o600 });
  return Buffer.from(readFileSync(file, 'utf8'), 'hex');
}

function json(status: number, value: unknown): Response {
  return new Response(JSON.stringify(value), { status, headers: { 'content-type': 'application/json; charset=utf-8', 'cache-control': 'no-store' } });
}

function html(body: string, headers: Record<string, string> = {}): Response {
  return new Response(body, { headers: { 'content-type': 'text/html; charset=utf-8', 'cache-control': 'no-store', ...headers } });
}
