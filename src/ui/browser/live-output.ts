/**
 * Page script: the live output panel of a run page. It follows `GET /api/runs/:id/stream` (an
 * EventSource: a dropped connection reconnects with Last-Event-ID, so nothing is shown twice) and draws
 * what the steps emitted: text joined per step attempt, other parts as JSON lines, an attempt's output
 * struck through once it is withdrawn (retracted), status changes as lines. The panel is made once per
 * run page and kept across its redraws; leaving the page closes the stream.
 */

/* exported liveOutputPanel, stopLiveOutput */

/** The output of one step attempt, drawn as one block. */
interface OutputBlock {
  step: string;
  attempt: number;
  el: HTMLElement;
  body: HTMLElement;
  /** The text being joined, when the block's last line is text. */
  text: HTMLElement | null;
}

let liveOutput: { stop(): void } | null = null;

function stopLiveOutput(): void {
  if (liveOutput) liveOutput.stop();
  liveOutput = null;
}

/** A string part, or an AI-SDK-like `{ type: 'text-delta' | 'text', text }` (also `delta` / `textDelta`); else null. */
function partText(data: unknown): string | null {
  if (typeof data === 'string') return data;
  if (typeof data !== 'object' || data === null) return null;
  const part = data as { type?: unknown; text?: unknown; delta?: unknown; textDelta?: unknown };
  if (part.type !== 'text-delta' && part.type !== 'text') return null;
  const values = [part.text, part.delta, part.textDelta];
  for (let i = 0; i < values.length; i++) {
    const value = values[i];
    if (typeof value === 'string') return value;
  }
  return null;
}

function statusLine(e: { status: RunStatus; detail?: string }): string {
  if (e.status === 'waiting') return '● waiting' + (e.detail ? " for signal '" + e.detail + "'" : '');
  return '● ' + e.status + (e.detail ? ' (' + e.detail + ')' : '');
}

/** What the panel has drawn: the blocks in order, the one text is being joined into. */
interface OutputPanel {
  body: HTMLElement;
  empty: HTMLElement;
  blocks: OutputBlock[];
  current: OutputBlock | null;
}

function blockFor(panel: OutputPanel, step: string, attempt: number): OutputBlock {
  const current = panel.current;
  if (current && current.step === step && current.attempt === attempt) return current;
  const lines = h('div', { class: 'out-lines' });
  const el = h('div', { class: 'out-block', 'data-step': step, 'data-attempt': attempt }, [
    h('div', { class: 'out-head' }, [h('span', { class: 'mono' }, step), ' · attempt ' + attempt]),
    lines,
  ]);
  const block: OutputBlock = { step, attempt, el, body: lines, text: null };
  panel.current = block;
  panel.blocks.push(block);
  panel.body.appendChild(el);
  return block;
}

function applyStreamEvent(panel: OutputPanel, e: StreamEventView): void {
  panel.empty.hidden = true;
  if (e.kind === 'part') {
    const block = blockFor(panel, e.step, e.attempt);
    const text = partText(e.data);
    if (text === null) {
      block.text = null;
      block.body.appendChild(h('div', { class: 'out-json mono', 'data-offset': e.offset }, JSON.stringify(e.data)));
    } else {
      if (!block.text) block.text = block.body.appendChild(h('div', { class: 'out-text' }));
      block.text.appendChild(h('span', { 'data-offset': e.offset }, text));
    }
    return;
  }
  panel.current = null;
  if (e.kind === 'retract') {
    for (const block of panel.blocks) {
      if (block.step !== e.step || block.attempt !== e.attempt || block.el.classList.contains('withdrawn')) continue;
      block.el.classList.add('withdrawn');
      block.el.appendChild(h('div', { class: 'out-note' }, '⟲ withdrawn: this attempt failed or died and will not be recorded'));
    }
    return;
  }
  panel.body.appendChild(h('div', { class: 'out-status', 'data-status': e.status, 'data-offset': e.offset }, statusLine(e)));
}

function liveOutputPanel(runId: string): HTMLElement {
  stopLiveOutput();
  const state = h('span', { class: 'muted out-state' }, 'connecting...');
  const panel: OutputPanel = { body: h('div', { class: 'out-body' }), empty: h('p', { class: 'muted out-empty' }, 'No output yet.'), blocks: [], current: null };
  const card = h('section', { class: 'card', id: 'live-output' }, [h('h2', null, ['Live output ', state]), panel.empty, panel.body]);
  const source = new EventSource(runPath(runId) + '/stream');
  let opened = false;
  source.onopen = () => {
    opened = true;
    state.textContent = 'following';
  };
  source.onmessage = (m: MessageEvent<string>) => {
    state.textContent = 'following';
    applyStreamEvent(panel, JSON.parse(m.data) as StreamEventView);
  };
  source.addEventListener('end', () => {
    source.close();
    state.textContent = 'the run has ended';
  });
  source.addEventListener('failure', (m: Event) => {
    source.close();
    const failure = (JSON.parse((m as MessageEvent<string>).data) as { error: { code: string; message: string } }).error;
    state.textContent = '';
    card.appendChild(notice('error', failure.code + ': ' + failure.message));
  });
  source.onerror = () => {
    if (source.readyState !== EventSource.CLOSED) state.textContent = 'reconnecting...';
    // Refused before any event (e.g. 501: a store that keeps no streams): nothing to follow here.
    else state.textContent = opened ? 'disconnected (reload the page to retry)' : 'not available for this run (the server refused the stream)';
  };
  liveOutput = { stop: () => source.close() };
  return card;
}
