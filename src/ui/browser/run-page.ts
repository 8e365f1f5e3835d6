/**
 * Page script: the run page (header, integrity, actions, steps). The operations card, the timeline and
 * the time-travel panel are in their own files.
 */

/* exported showRun, keyAt */

interface Message {
  kind: 'ok' | 'error';
  text: string;
}

/** One open run page: the last detail drawn, the selected checkpoint, the checkpoints fetched so far. */
interface RunView {
  runId: string;
  detail: RunDetailView | null;
  seq: number | null;
  cache: Partial<Record<string, Promise<CheckpointView>>>; // no entry until a checkpoint is first asked for
  message: Message | null;
  /** Draws again from a fresh fetch, with a message over the actions. */
  reload(message?: Message): void;
  /** Selects a checkpoint in the time-travel panel (set by each render). */
  select(seq: number): void;
  /** The live output panel: made once, kept across redraws (live-output.ts). */
  output: HTMLElement;
}

function showRun(runId: string, params: URLSearchParams): void {
  const token = viewToken;
  document.title = runId + ' - Waypoint';
  const wanted = params.get('seq');
  const view: RunView = {
    runId,
    detail: null,
    seq: wanted !== null && /^\d+$/.test(wanted) ? Number(wanted) : null,
    cache: {},
    message: null,
    reload(message) {
      view.message = message || null;
      lastBody = null;
      stopTimer();
      load(true);
    },
    select() {},
    output: liveOutputPanel(runId),
  };
  app.replaceChildren(crumbs(runId), h('p', { class: 'muted' }, 'Loading run...'));
  // A poll asks only for the steps after the newest one held (`since`); a first load or a reload, for the newest window.
  function load(full = false): void {
    const held = full ? null : view.detail;
    const newest = held && held.steps.length ? held.steps[held.steps.length - 1].sequence : null;
    // "Show all" on a control-flow run's steps asks for as many as the server sends at once.
    const size = flowMemory.runId === runId && flowMemory.open['#steps'] ? ALL_STEPS : STEPS_WINDOW;
    request<RunDetailView>(runPath(runId) + '?steps=' + size + (newest === null ? '' : '&since=' + newest))
      .then((r) => {
        if (token !== viewToken) return;
        const detail = merged(held, r.body);
        if (detail === null) return load(true); // the held rows no longer add up (compacted or rewound): start over
        if (r.text !== lastBody) {
          lastBody = r.text;
          const previous = view.detail;
          view.detail = detail;
          // Follow the newest checkpoint while the run moves, unless the person picked an older one.
          if (view.seq === null || (previous && view.seq === previous.checkpoints.latest)) view.seq = detail.checkpoints.latest;
          renderRun(view, detail);
        }
        const active = isActive(detail.run.status);
        setLive(active);
        if (active) schedule(() => load());
      })
      .catch((err: unknown) => {
        if (token !== viewToken) return;
        app.replaceChildren(crumbs(runId), notice('error', messageOf(err)));
      });
  }
  load();
}

/** Step views a first load asks for (the server's default too): a 20,000-step run opens on its newest ones. */
const STEPS_WINDOW = 500;
/** The most step views the server sends in one answer. */
const ALL_STEPS = 5000;

/**
 * A poll's answer joined to what the page holds: new steps appended, origins redrawn when a session began
 * (a row of an earlier session is `restored`). Null when the counts do not add up, so the page loads anew.
 */
function merged(held: RunDetailView | null, body: RunDetailView): RunDetailView | null {
  if (held === null || body.window.since === null) return body;
  const steps = held.steps.concat(body.steps);
  if (held.window.older + steps.length !== body.window.total) return null;
  if (body.sessions !== held.sessions) {
    steps.forEach((s) => {
      s.origin = s.session === 0 ? 'copied' : s.session < body.sessions ? 'restored' : 'executed';
    });
  }
  return { ...body, steps, flowSteps: held.flowSteps.concat(body.flowSteps), window: { ...body.window, older: held.window.older } };
}

/** Fetches the step views before the oldest one held and draws the run again with them. */
function loadEarlier(view: RunView, d: RunDetailView): void {
  request<StepsPageView>(runPath(d.run.runId) + '/steps?before=' + d.steps[0].sequence + '&limit=' + STEPS_WINDOW)
    .then((r) => {
      if (view.detail !== d) return; // a poll drew the run meanwhile: its next redraw keeps the window
      view.detail = { ...d, steps: r.body.steps.concat(d.steps), window: { ...d.window, older: r.body.older } };
      renderRun(view, view.detail);
    })
    .catch((err: unknown) => {
      view.message = { kind: 'error', text: messageOf(err) };
      renderRun(view, d);
    });
}

function crumbs(runId: string): HTMLElement {
  return h('nav', { class: 'crumbs' }, [h('a', { href: '#/' }, 'Runs'), ' / ', h('span', { class: 'mono' }, runId)]);
}

function renderRun(view: RunView, d: RunDetailView): void {
  const scroll = window.scrollY;
  const travel = timeTravelCard(view, d);
  view.select = (seq) => travel.select(seq);
  app.replaceChildren(crumbs(d.run.runId), headerCard(view, d), view.output, timelineCard(view, d), stepsCard(view, d), operationsCard(d), travel.el);
  window.scrollTo(0, scroll);
}

function createdByText(meta: Record<string, string>): HTMLElement | string {
  if (!Object.keys(meta).length) return '-';
  const text = (meta.worker || 'process') + (meta.host ? ' on ' + meta.host : '') + (meta.pid ? ', pid ' + meta.pid : '');
  return h(
    'span',
    {
      title: Object.keys(meta)
        .map((k) => k + ': ' + meta[k])
        .join('\n'),
    },
    text,
  );
}

function fact(label: string, value: Children): HTMLElement {
  return h('div', null, [h('dt', null, label), h('dd', null, value)]);
}

function headerCard(view: RunView, d: RunDetailView): HTMLElement {
  const run = d.run;
  const resumes = d.resumePoints.length;
  const last = d.steps.length ? ms(d.steps[d.steps.length - 1].completedAt) : null;
  const elapsed = (isActive(run.status) ? Date.now() : Math.max(ms(run.updatedAt), last || 0)) - ms(run.startedAt);
  const origin = run.forkedFrom
    ? h('a', { href: '#/runs/' + encodeURIComponent(run.forkedFrom.runId) }, run.forkedFrom.runId + ' @ ' + run.forkedFrom.atSequence)
    : createdByText(run.createdBy);
  const lease: Children = run.lease
    ? [run.lease.owner, ' ', run.lease.expired ? tag('failed', 'expired', 'lease ran out ' + run.lease.expiresAt + ': the executor probably died') : tag('executed', 'live')]
    : 'none';
  const facts = h('dl', { class: 'facts' }, [
    fact('Pipeline', [run.pipeline, ' ', h('span', { class: 'muted' }, '@' + run.version)]),
    fact('Progress', progressEl(run.progress)),
    fact('Started', timeEl(run.startedAt)),
    fact('Updated', timeEl(run.updatedAt)),
    fact('Elapsed', fmtDuration(elapsed)),
    fact('Sessions', d.sessions + (resumes ? ' (resumed ' + (resumes === 1 ? 'once' : resumes + ' times') + ')' : '')),
    fact('Executor lease', lease),
    fact(run.forkedFrom ? 'Forked from' : 'Created by', origin),
    run.parent
      ? fact('Parent run', [
          h('a', { id: 'parent-link', class: 'mono', href: '#/runs/' + encodeURIComponent(run.parent.runId) }, run.parent.runId),
          run.parent.itemIndex === null ? null : h('span', { class: 'muted' }, ' item ' + run.parent.itemIndex),
        ])
      : null,
  ]);
  return h('section', { class: 'card', id: 'run-header' }, [
    h('h1', null, [h('span', { class: 'mono' }, run.runId), badge(run.status)]),
    facts,
    // A failed run's hint repeats its error, which is shown right below.
    run.resumeHint && !(run.status === 'failed' && run.error) ? h('p', { class: 'hint' }, run.resumeHint) : null,
    run.error ? notice('error', 'Run error: ' + errorText(run.error)) : null,
    integrityNotice(d.integrity),
    view.message ? notice(view.message.kind, view.message.text) : null,
    actionsRow(view, d),
  ]);
}

function integrityNotice(i: IntegrityView): HTMLElement {
  const seal = i.seal === 'hmac' ? 'HMAC-SHA-256' : 'SHA-256';
  if (i.status === 'verified')
    return h('div', { class: 'notice ok', id: 'integrity', 'data-integrity': i.status }, 'Integrity verified: ' + i.rows + ' checkpoint rows, every ' + seal + ' matches.');
  if (i.status === 'empty') return h('div', { class: 'notice warn', id: 'integrity', 'data-integrity': i.status }, 'No checkpoints recorded yet.');
  const kind = i.status === 'corrupted' ? 'error' : 'warn';
  return h(
    'div',
    { class: 'notice ' + kind, id: 'integrity', 'data-integrity': i.status, role: 'alert' },
    (i.status === 'corrupted' ? 'Integrity check failed at sequence ' + i.sequence + ': ' : 'Integrity not verified: ') + i.message,
  );
}

function actionsRow(view: RunView, d: RunDetailView): HTMLElement | null {
  if (!d.actions.allowed) return null;
  function act(name: 'resume' | 'cancel', payload: object, confirmText?: string): () => void {
    return () => {
      if (confirmText && !window.confirm(confirmText)) return;
      post<ResumeView>(runPath(d.run.runId) + '/' + name, payload)
        .then((r) => {
          const text =
            name === 'resume'
              ? r.body.accepted
                ? 'Resume started; the page follows it.'
                : 'Resumed: ' + r.body.status + ', ' + r.body.stepsExecuted + ' step(s) executed.'
              : 'Run cancelled.';
          view.reload({ kind: 'ok', text });
        })
        .catch((err: unknown) => {
          view.reload({ kind: 'error', text: name + ' failed: ' + messageOf(err) });
        });
    };
  }
  return h('div', { class: 'actions' }, [
    h('button', { type: 'button', class: 'primary', id: 'action-resume', disabled: !d.actions.resume, onclick: act('resume', {}) }, 'Resume'),
    h(
      'button',
      {
        type: 'button',
        class: 'danger',
        id: 'action-cancel',
        disabled: !d.actions.cancel,
        onclick: act('cancel', {}, 'Cancel run ' + d.run.runId + '? A cancelled run is never resumed.'),
      },
      'Cancel run',
    ),
    h('span', { class: 'muted' }, 'Fork from any checkpoint in the time-travel panel below.'),
  ]);
}

function stepStatusTags(s: StepView): Child[] {
  const title =
    s.origin === 'restored'
      ? 'recorded by session ' + s.session + ', restored from its checkpoint on resume'
      : s.origin === 'copied'
        ? 'copied from the source run by a fork'
        : 'executed by session ' + s.session;
  return [tag(s.origin, s.origin, title), s.retried ? tag('retried', 'retried') : null];
}

/** Model calls and tokens of a step (waypoint/ai), with what a resume did not repeat. */
function aiTag(ai: AiUsage & { reused: AiUsage }): HTMLElement {
  const n = (v: number) => v.toLocaleString('en-US');
  const text = 'ai: ' + n(ai.modelCalls) + ' model call(s), ' + n(ai.inputTokens + ai.outputTokens) + ' tokens, ' + n(ai.toolCalls) + ' tool call(s)';
  const saved =
    ai.reused.modelCalls + ai.reused.toolCalls > 0
      ? '; not repeated on resume: ' +
        n(ai.reused.modelCalls) +
        ' model call(s), ' +
        n(ai.reused.inputTokens + ai.reused.outputTokens) +
        ' tokens, ' +
        n(ai.reused.toolCalls) +
        ' tool call(s)'
      : '';
  return h('span', { class: 'tag committed ai-usage', title: n(ai.inputTokens) + ' input + ' + n(ai.outputTokens) + ' output tokens' }, text + saved);
}

/** Step rows a control-flow run's table shows before "Show all". */
const STEPS_PAGE = 100;

function stepsCard(view: RunView, d: RunDetailView): HTMLElement {
  const rows: HTMLElement[] = [];
  if (d.window.older > 0 && d.steps.length > 0) {
    const earlier = h('button', { type: 'button', id: 'steps-earlier', onclick: () => loadEarlier(view, d) }, 'Load ' + Math.min(STEPS_WINDOW, d.window.older) + ' earlier');
    rows.push(h('tr', { class: 'steps-more' }, h('td', { colspan: 7, class: 'muted' }, [d.window.older + ' earlier steps not loaded. ', earlier])));
  }
  const points = d.resumePoints.slice();
  // A control-flow run can record thousands of item steps: the table shows a page of them until asked for all.
  const limit = d.flow && d.steps.length > STEPS_PAGE * 2 && !(flowMemory.runId === d.run.runId && flowMemory.open['#steps']) ? STEPS_PAGE : d.steps.length;
  d.steps.slice(0, limit).forEach((s) => {
    points.filter((p) => p.beforeSequence === s.sequence).forEach((p) => rows.push(resumeRow(p)));
    rows.push(stepRow(view, d, s));
  });
  points.filter((p) => p.beforeSequence === null).forEach((p) => rows.push(resumeRow(p)));
  d.failedSteps.forEach((f) => rows.push(failedStepRow(f)));
  if (limit < d.steps.length) {
    const more = h(
      'button',
      {
        type: 'button',
        id: 'steps-all',
        onclick: () => {
          flowMemory.open['#steps'] = true;
          view.reload();
        },
      },
      'Show all ' + d.steps.length + ' steps',
    );
    rows.push(h('tr', { class: 'steps-more' }, h('td', { colspan: 7, class: 'muted' }, [d.steps.length - limit + ' more steps not shown. ', more])));
  }
  if (rows.length === 0) rows.push(h('tr', null, h('td', { colspan: 7, class: 'empty' }, 'No steps recorded yet.')));
  return h('section', { class: 'card', id: 'steps' }, [
    h('h2', null, 'Steps'),
    h('table', { class: 'steps-table' }, [
      h(
        'thead',
        null,
        h(
          'tr',
          null,
          ['Seq', 'Step', 'Started', 'Duration', 'Attempt', 'Status', 'Side effects'].map((t, i) => h('th', { class: i === 0 || i === 3 || i === 4 ? 'num' : null }, t)),
        ),
      ),
      h('tbody', null, rows),
    ]),
  ]);
}

/** A recorded step's table row (selects its checkpoint on click); its `durable:ai:` calls are summed in one tag. */
function stepRow(view: RunView, d: RunDetailView, s: RunDetailView['steps'][number]): HTMLElement {
  const effects = d.sideEffects.filter((e) => e.stepKey === s.key && !(s.ai && e.state === 'committed' && e.name.indexOf('durable:ai:') === 0));
  return h('tr', { 'data-seq': s.sequence, class: s.sequence === view.seq ? 'selected' : null, onclick: () => view.select(s.sequence) }, [
    h('td', { class: 'num' }, s.sequence),
    h('td', null, d.flow && s.path !== s.key ? h('span', { class: 'mono', title: s.path }, s.path) : [h('span', { class: 'muted' }, s.agentId + ' / '), s.name]),
    h('td', null, timeEl(s.startedAt)),
    h('td', { class: 'num' }, fmtDuration(s.durationMs)),
    h('td', { class: 'num' }, s.attempt),
    h('td', null, s.status === 'skipped' ? tag('skipped', 'skipped', 'its `when` said no') : stepStatusTags(s)),
    h('td', null, (s.ai ? [aiTag(s.ai)] : []).concat(effects.map((e) => tag(e.state, e.name + ': ' + e.state)))),
  ]);
}

/** The row of a step that failed without a checkpoint row: its attempts and last error. */
function failedStepRow(f: RunDetailView['failedSteps'][number]): HTMLElement {
  return h('tr', { class: 'failed-step' }, [
    h('td', { class: 'num muted' }, '-'),
    h('td', null, [h('span', { class: 'muted' }, f.agentId + ' / '), f.name]),
    h('td', null, timeEl(f.lastAt)),
    h('td', { class: 'num' }, '-'),
    h('td', { class: 'num' }, f.attempts),
    h('td', null, tag('failed', 'failed')),
    h('td', { class: 'error-text' }, errorText(f.lastError)),
  ]);
}

/** Key of the step at a cursor position: from the plan when the UI knows it, else from the recorded rows. */
function keyAt(d: RunDetailView, agentIndex: number, stepIndex: number): string {
  if (d.planKnown) {
    if (agentIndex >= d.agents.length) return 'end of pipeline';
    const a = d.agents[agentIndex];
    const step = a ? a.steps.filter((x) => x.index === stepIndex)[0] : undefined;
    if (step) return step.key;
  }
  const s = d.steps.filter((x) => x.agentIndex === agentIndex && x.stepIndex === stepIndex)[0];
  return s ? s.key : 'agent ' + agentIndex + ', step ' + stepIndex;
}
