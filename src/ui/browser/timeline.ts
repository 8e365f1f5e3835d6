/**
 * Page script: the Gantt-like timeline. One row per step, grouped by agent, bars on a time axis whose
 * long idle gaps at resume points are collapsed to a fixed-width break (a run resumed after a day would
 * otherwise be two slivers).
 */

/* exported timelineCard */

const BREAK_PCT = 8;
const NOTE_ROOM_PCT = 88;

type BarKind = 'executed' | 'running' | 'restored' | 'retried' | 'failed' | 'copied';

/** An idle gap drawn as a break, in epoch milliseconds. */
interface Gap {
  from: number;
  to: number;
  p: ResumePointView;
}

function timelineCard(view: RunView, d: RunDetailView): HTMLElement {
  const agents: Record<string, true> = {};
  d.steps.forEach((s) => {
    agents[s.agentId] = true;
  });
  const agentCount = Object.keys(agents).length;
  let summary = d.window.total + ' recorded step' + (d.window.total === 1 ? '' : 's') + ' in ' + agentCount + ' agent' + (agentCount === 1 ? '' : 's');
  if (d.window.older > 0) summary += ' (the newest ' + d.steps.length + ' drawn)';
  if (d.flow) summary += ', control flow';
  if (d.resumePoints.length) summary += ', resumed ' + (d.resumePoints.length === 1 ? 'once' : d.resumePoints.length + ' times');
  if (d.failedSteps.length) summary += ', ' + d.failedSteps.length + ' failing step' + (d.failedSteps.length === 1 ? '' : 's');
  // Only the kinds this run has, so the legend reads as a description of it.
  const running = d.run.status === 'running' && d.run.lease !== null && !d.run.lease.expired;
  const kinds: Record<BarKind, boolean> = { executed: false, running, restored: false, retried: d.steps.some((s) => s.retried), failed: d.failedSteps.length > 0, copied: false };
  d.steps.forEach((s) => {
    if (!s.retried) kinds[s.origin] = true;
  });
  const names: Record<BarKind, string> = {
    executed: 'executed',
    running: 'running',
    restored: 'restored from checkpoint',
    retried: 'retried',
    failed: 'failed',
    copied: 'copied by fork',
  };
  const shown = (Object.keys(names) as BarKind[]).filter((k) => kinds[k]);
  const legend = h(
    'div',
    { class: 'legend' },
    shown
      .map((k) => h('span', null, [h('i', { class: 'swatch sw-' + k }), names[k]]))
      .concat(d.resumePoints.length ? [h('span', null, [h('i', { class: 'swatch sw-resume' }), 'resume point'])] : []),
  );
  return h('section', { class: 'card', id: 'timeline' }, [
    h('h2', null, ['Timeline ', h('span', { class: 'muted' }, '- ' + summary)]),
    legend,
    // A control-flow run is a tree: drawn as lanes, iterations and item groups instead of one line of steps.
    d.flow ? flowTree(view, d, d.flow) : gantt(view, d),
    d.systemRows.length
      ? h(
          'ul',
          { class: 'system-rows muted' },
          d.systemRows.map((r) => h('li', null, systemRowText(r))),
        )
      : null,
  ]);
}

/** Maps instants to x positions (percent), collapsing the given gaps to BREAK_PCT each. */
function axis(t0: number, t1: number, gaps: readonly Gap[]): (t: number) => number {
  const collapsed = gaps.reduce((sum, g) => sum + (g.to - g.from), 0);
  const active = Math.max(1, t1 - t0 - collapsed);
  const usable = NOTE_ROOM_PCT - gaps.length * BREAK_PCT;
  return (t) => {
    let before = 0;
    for (let i = 0; i < gaps.length; i++) {
      const g = gaps[i];
      if (t <= g.from) return ((t - t0 - before) / active) * usable + i * BREAK_PCT;
      if (t < g.to) return ((g.from - t0 - before) / active) * usable + i * BREAK_PCT + ((t - g.from) / (g.to - g.from)) * BREAK_PCT;
      before += g.to - g.from;
    }
    return ((t - t0 - before) / active) * usable + gaps.length * BREAK_PCT;
  };
}

function niceStep(span: number): number {
  const raw = span / 6;
  const pow = Math.pow(10, Math.floor(Math.log10(Math.max(raw, 1))));
  let best = pow;
  [1, 2, 5, 10].forEach((m) => {
    if (raw >= m * pow) best = m * pow;
  });
  return best;
}

function place<E extends HTMLElement>(el: E, left: number, width?: number): E {
  el.style.left = left.toFixed(3) + '%';
  if (width !== undefined) el.style.width = Math.max(0, width).toFixed(3) + '%';
  return el;
}

/** What every row of the chart shares: the time span, its gaps, the x mapping, and where the run stands. */
interface GanttFrame {
  t0: number;
  t1: number;
  span: number;
  gaps: Gap[];
  x: (t: number) => number;
  /** The step being executed now (a live run's cursor), or null. */
  cursorKey: string | null;
  /** When the last checkpointed step ended (the run's start before any). */
  lastEnd: number;
}

function gantt(view: RunView, d: RunDetailView): HTMLElement {
  if (!d.steps.length && !d.failedSteps.length && !d.attempts.length) return h('p', { class: 'empty' }, 'No steps recorded yet.');
  const frame = ganttFrame(d);
  const root = h('div', { class: 'gantt', role: 'img', 'aria-label': 'Timeline of ' + d.steps.length + ' steps' });
  // Flag lane and axis.
  const flags = h('div', { class: 'g-track' });
  root.appendChild(h('div', { class: 'g-row' }, [h('div', { class: 'g-label muted' }, ''), flags]));
  root.appendChild(h('div', { class: 'g-row' }, [h('div', { class: 'g-label muted' }, 'elapsed'), axisTicks(frame)]));

  const byKey: Record<string, StepView | undefined> = {};
  d.steps.forEach((s) => {
    byKey[s.key] = s;
  });
  const failedByKey: Record<string, FailedStepView | undefined> = {};
  d.failedSteps.forEach((f) => {
    failedByKey[f.key] = f;
  });
  d.agents.forEach((agent) => {
    const done = agent.steps.filter((s) => byKey[s.key]).length;
    root.appendChild(
      h('div', { class: 'g-row g-agent' }, [
        h('div', { class: 'g-label', title: agent.id }, [agent.id, ' ', h('span', { class: 'muted' }, done + agent.hidden + '/' + (agent.steps.length + agent.hidden))]),
        h('div', { class: 'g-track' }),
      ]),
    );
    agent.steps.forEach((ps) => {
      const s = byKey[ps.key];
      const f = failedByKey[ps.key];
      const label = h('div', { class: 'g-label' + (s || f || ps.key === frame.cursorKey ? '' : ' g-pending'), title: ps.key }, [
        h('span', { class: 'seq' }, s ? '#' + s.sequence : ''),
        ps.name,
      ]);
      root.appendChild(h('div', { class: 'g-row', 'data-step': ps.key }, [label, stepTrack(view, d, frame, ps.key, s, f)]));
    });
  });
  root.appendChild(resumeOverlay(d, frame, flags));
  return root;
}

type FailedStepView = RunDetailView['failedSteps'][number];

/** The time span of the chart; resume gaps longer than 12% of it are collapsed to a break. */
function ganttFrame(d: RunDetailView): GanttFrame {
  const live = d.run.status === 'running' && d.run.lease !== null && !d.run.lease.expired;
  // A fork is created long after the rows it copies: its creation time would stretch the axis.
  const times = d.run.forkedFrom && d.steps.length ? [] : [ms(d.run.startedAt)];
  d.steps.forEach((s) => times.push(ms(s.startedAt), ms(s.completedAt)));
  d.attempts.forEach((a) => times.push(ms(a.at)));
  const t0 = Math.min(...times);
  const t1 = Math.max(...times.concat(live ? [Date.now()] : []));
  const span = Math.max(1, t1 - t0);
  const gaps: Gap[] = d.resumePoints
    .map((p) => ({ from: ms(p.idleFrom), to: ms(p.resumedAt), p }))
    .filter((g) => g.to - g.from > 0.12 * span)
    .sort((a, b) => a.from - b.from)
    .filter((g, i, all) => i === 0 || g.from >= all[i - 1].to);
  return {
    t0,
    t1,
    span,
    gaps,
    x: axis(t0, t1, gaps),
    cursorKey: live ? keyAt(d, d.run.cursor.agentIndex, d.run.cursor.stepIndex) : null,
    lastEnd: d.steps.length ? ms(d.steps[d.steps.length - 1].completedAt) : ms(d.run.startedAt),
  };
}

/** The elapsed-time axis: ticks at a round step, none inside a collapsed gap, each gap labelled with its length. */
function axisTicks({ t0, t1, span, gaps, x }: GanttFrame): HTMLElement {
  const ticks = h('div', { class: 'g-track g-axis' });
  const step = niceStep(span - gaps.reduce((sum, g) => sum + g.to - g.from, 0));
  for (let t = 0; t0 + t <= t1; t += step) {
    const at = t0 + t;
    if (gaps.some((g) => at > g.from - step / 3 && at < g.to + step / 3) && t !== 0) continue;
    ticks.appendChild(place(h('span', { class: 'tick' + (t === 0 ? ' first' : '') }, t === 0 ? '0' : '+' + fmtTick(t)), x(at)));
  }
  gaps.forEach((g) => {
    ticks.appendChild(
      place(
        h('span', { class: 'tick gap-label', title: 'time between the last checkpoint and the resumed step (not to scale)' }, 'gap ' + fmtDuration(g.to - g.from)),
        (x(g.from) + x(g.to)) / 2,
      ),
    );
  });
  return ticks;
}

/** One plan step's lane: its recorded bar, its failed attempts' bar, or the running bar; and a mark per failed attempt. */
function stepTrack(view: RunView, d: RunDetailView, frame: GanttFrame, key: string, s: StepView | undefined, f: FailedStepView | undefined): HTMLElement {
  const { x } = frame;
  const track = h('div', { class: 'g-track' });
  if (s) {
    const kind = s.retried ? 'retried' : s.origin;
    const left = x(ms(s.startedAt));
    const right = x(ms(s.completedAt));
    track.appendChild(
      place(h('div', { class: 'bar ' + kind, 'data-seq': s.sequence, 'data-kind': kind, title: stepTitle(s), onclick: () => view.select(s.sequence) }), left, right - left),
    );
    track.appendChild(
      barNote(
        right,
        fmtDuration(s.durationMs) +
          (s.retried ? ' \u00B7 attempt ' + s.attempt : '') +
          (s.sideEffectsCommitted ? ' \u00B7 side effect' : '') +
          (s.ai ? ' \u00B7 ' + (s.ai.inputTokens + s.ai.outputTokens) + ' tokens' : ''),
      ),
    );
  } else if (f) {
    const first = d.attempts.filter((a) => a.stepKey === f.key).map((a) => ms(a.at));
    const from = Math.max(
      ...d.steps
        .map((x2) => ms(x2.completedAt))
        .filter((v) => v <= first[0])
        .concat([ms(d.run.startedAt)]),
    );
    const fl = x(from);
    const fr = x(ms(f.lastAt));
    track.appendChild(
      place(h('div', { class: 'bar failed', 'data-kind': 'failed', title: f.key + '\n' + f.attempts + ' failed attempt(s)\n' + errorText(f.lastError) }), fl, fr - fl),
    );
    track.appendChild(barNote(fr, 'failed \u00D7' + f.attempts));
  } else if (key === frame.cursorKey) {
    const il = x(frame.lastEnd);
    const ir = x(frame.t1);
    track.appendChild(place(h('div', { class: 'bar running', 'data-kind': 'running', title: key + ' is running (not checkpointed yet)' }), il, ir - il));
    track.appendChild(barNote(ir, 'running ' + fmtDuration(frame.t1 - frame.lastEnd)));
  }
  d.attempts
    .filter((a) => a.stepKey === key)
    .forEach((a) => {
      track.appendChild(
        place(h('span', { class: 'attempt-mark', title: 'attempt ' + a.attempt + ' failed (session ' + a.session + ')\n' + errorText(a.error) }, '\u2715'), x(ms(a.at))),
      );
    });
  return track;
}

/** A recorded step's tooltip: sequence, key, duration, attempt, who recorded it, side effects, model use. */
function stepTitle(s: StepView): string {
  const origin =
    s.origin === 'copied'
      ? 'copied from the source run by a fork'
      : s.origin === 'restored'
        ? 'recorded by session ' + s.session + ', restored from its checkpoint on resume'
        : 'executed by session ' + s.session;
  const ai = s.ai
    ? '\nai: ' +
      s.ai.modelCalls +
      ' model call(s), ' +
      (s.ai.inputTokens + s.ai.outputTokens) +
      ' tokens' +
      (s.ai.reused.modelCalls ? ', ' + s.ai.reused.modelCalls + ' reused on resume' : '')
    : '';
  return (
    '#' + s.sequence + ' ' + s.key + '\n' + fmtDuration(s.durationMs) + ', attempt ' + s.attempt + '\n' + origin + (s.sideEffectsCommitted ? '\nside effects committed' : '') + ai
  );
}

/** The collapsed gaps as breaks over the chart, a line at each resume, and its flag in the flag lane. */
function resumeOverlay(d: RunDetailView, { gaps, x }: GanttFrame, flags: HTMLElement): HTMLElement {
  const overlay = h('div', { class: 'g-overlay' });
  gaps.forEach((g) => {
    const l = x(g.from);
    const r = x(g.to);
    overlay.appendChild(place(h('div', { class: 'gap-break', title: fmtDuration(g.to - g.from) + ' between the last checkpoint and the resumed step, not to scale' }), l, r - l));
  });
  d.resumePoints.forEach((p) => {
    const px = x(ms(p.resumedAt));
    overlay.appendChild(place(h('div', { class: 'resume-line', title: resumeText(p) }), px));
    const flag = h(
      'span',
      { class: 'resume-flag' + (px > 60 ? ' left' : ''), 'data-resume-session': p.session, title: resumeText(p) },
      (p.reason === 'fork' ? 'forked, resumed' : 'resumed') + ' \u00B7 session ' + p.session + ' \u00B7 after ' + fmtDuration(p.gapMs),
    );
    flags.appendChild(place(flag, px));
  });
  return overlay;
}

/** Rows the runtime writes for itself are not steps: say what each one is. */
function systemRowText(r: SystemRowView): string {
  if (r.kind === 'base') return '#' + r.sequence + ' is a base snapshot (written by retention, a checkpoint migration or a fork): the steps folded into it are not shown.';
  if (r.kind === 'patch') return '#' + r.sequence + ' is a state patch (patchState of a fork), applied before the next step.';
  return '#' + r.sequence + ' is a ' + r.kind + ' row written by the runtime.';
}

/** Axis labels: whole seconds without decimals. */
function fmtTick(t: number): string {
  return t >= 1000 && t < 60000 && t % 1000 === 0 ? t / 1000 + ' s' : fmtDuration(t);
}

function barNote(at: number, text: string): HTMLElement {
  const note = h('span', { class: 'bar-note' }, text);
  note.style.left = 'calc(' + at.toFixed(3) + '% + 6px)';
  return note;
}
