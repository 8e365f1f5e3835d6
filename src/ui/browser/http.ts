/**
 * Page script: the JSON API client and the refresh loop shared by the views. A view keeps refreshing
 * while what it shows can still move, and stops when the hash changes (`viewToken` moves on).
 */

/* exported lastBody, viewToken, post, runPath, messageOf, schedule, setLive, isActive */

const REFRESH_MS = 2000;
const ACTIVE: Partial<Record<RunStatus, true>> = { running: true, waiting: true };

let timer: number | null = null;
/** Text of the last answer drawn: an unchanged answer is not redrawn (keeps focus, selection, scroll). */
let lastBody: string | null = null;
/** Bumped on every route change, so answers for a view that is gone are dropped. */
let viewToken = 0;

/** A refused API request: the server's error code and message. */
class ApiError extends Error {
  constructor(
    message: string,
    readonly status: number,
    readonly code: string | null,
  ) {
    super(message);
  }
}

interface Answer<T> {
  body: T;
  text: string;
}

interface ErrorBody {
  error?: { code: string; message: string };
}

/** `T` is what the endpoint answers: a view of src/ui/api-types.ts, the type the server builds the answer with. */
function request<T>(path: string, init?: RequestInit): Promise<Answer<T>> {
  return fetch(path, Object.assign({ credentials: 'same-origin', headers: { accept: 'application/json' } }, init || {})).then((res) =>
    res.text().then((text) => {
      let body: unknown = null;
      try {
        body = text ? JSON.parse(text) : null;
      } catch {
        body = null;
      }
      if (!res.ok) {
        const failure = (body as ErrorBody | null)?.error;
        throw new ApiError(failure ? failure.message : 'The server answered HTTP ' + res.status + '.', res.status, failure ? failure.code : null);
      }
      return { body: body as T, text };
    }),
  );
}

function post<T>(path: string, payload?: object): Promise<Answer<T>> {
  return request<T>(path, { method: 'POST', headers: { 'content-type': 'application/json', accept: 'application/json' }, body: JSON.stringify(payload || {}) });
}

function runPath(runId: string): string {
  return 'api/runs/' + encodeURIComponent(runId);
}

/** The message of whatever a promise was rejected with. */
function messageOf(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

function schedule(fn: () => void): void {
  stopTimer();
  timer = setTimeout(fn, REFRESH_MS);
}

function stopTimer(): void {
  if (timer !== null) clearTimeout(timer);
  timer = null;
}

function setLive(on: boolean): void {
  liveEl.hidden = !on;
}

function isActive(status: RunStatus): boolean {
  return ACTIVE[status] === true;
}
