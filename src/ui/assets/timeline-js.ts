/**
 * Page script, part 3: the Gantt-like timeline. One row per step, grouped by agent, bars on a time axis
 * whose long idle gaps at resume points are collapsed to a fixed-width break (a run resumed after a
 * day would otherwise be two slivers).
 */
export const TIMELINE_JS = String.raw`
var BREAK_PCT = 8;
var NOTE_ROOM_PCT = 88;

function timelineCard(view) {
  var d = view.detail;
  var agents = {};
  d.steps.forEach(function (s) { agents[s.agentId] = true; });
  var summary = d.steps.length + ' recorded step' + (d.steps.length === 1 ? '' : 's') + ' in ' + Object.keys(agents).length + ' agent' + (Object.keys(agents).length === 1 ? '' : 's');
  if (d.resumePoints.length) summary += ', resumed ' + (d.resumePoints.length === 1 ? 'once' : d.resumePoints.length + ' times');
  if (d.failedSteps.length) summary += ', ' + d.failedSteps.length + ' failing step' + (d.failedSteps.length === 1 ? '' : 's');
  // Only the kinds this run has, so the legend reads as a description of it.
  var running = d.run.status === 'running' && d.run.lease && !d.run.lease.expired;
  var kinds = { executed: false, running: running, restored: false, retried: d.steps.some(function (s) { return s.retried; }), failed: d.failedSteps.length > 0, copied: false };
  d.steps.forEach(function (s) { if (!s.retried) kinds[s.origin] = true; });
  var names = { executed: 'executed', running: 'running', restored: 'restored from checkpoint', retried: 'retried', failed: 'failed', copied: 'copied by fork' };
  var legend = h('div', { class: 'legend' }, Object.keys(names).filter(function (k) { return kinds[k]; })
    .map(function (k) { return h('span', null, [h('i', { class: 'swatch sw-' + k }), names[k]]); })
    .concat(d.resumePoints.length ? [h('span', null, [h('i', { class: 'swatch sw-resume' }), 'resume point'])] : []));
  return h('section', { class: 'card', id: 'timeline' }, [
    h('h2', null, ['Timeline ', h('span', { class: 'muted' }, '- ' + summary)]),
    legend,
    gantt(view),
    d.systemRows.length ? h('ul', { class: 'system-rows muted' }, d.systemRows.map(function (r) { return h('li', null, systemRowText(r)); })) : null,
  ]);
}

/** Maps instants to x positions (percent), collapsing the given gaps to BREAK_PCT each. */
function axis(t0, t1, gaps) {
  var collapsed = gaps.reduce(function (sum, g) { return sum + (g.to - g.from); }, 0);
  var active = Math.max(1, t1 - t0 - collapsed);
  var usable = NOTE_ROOM_PCT - gaps.length * BREAK_PCT;
  return function (t) {
    var before = 0;
    for (var i = 0; i < gaps.length; i++) {
      var g = gaps[i];
      if (t <= g.from) return ((t - t0 - before) / active) * usable + i * BREAK_PCT;
      if (t < g.to) return ((g.from - t0 - before) / active) * usable + i * BREAK_PCT + ((t - g.from) / (g.to - g.from)) * BREAK_PCT;
      before += g.to - g.from;
    }
    return ((t - t0 - before) / active) * usable + gaps.length * BREAK_PCT;
  };
}

function niceStep(span) {
  var raw = span / 6, pow = Math.pow(10, Math.floor(Math.log10(Math.max(raw, 1))));
  var best = pow;
  [1, 2, 5, 10].forEach(function (m) { if (raw >= m * pow) best = m * pow; });
  return best;
}

function place(el, left, width) {
  el.style.left = left.toFixed(3) + '%';
  if (width !== undefined) el.style.width = Math.max(0, width).toFixed(3) + '%';
  return el;
}

function gantt(view) {
  var d = view.detail;
  if (!d.steps.length && !d.failedSteps.length && !d.attempts.length) return h('p', { class: 'empty' }, 'No steps recorded yet.');
  var live = d.run.status === 'running' && d.run.lease && !d.run.lease.expired;
  // A fork is created long after the rows it copies: its creation time would stretch the axis.
  var times = d.run.forkedFrom && d.steps.length ? [] : [ms(d.run.startedAt)];
  d.steps.forEach(function (s) { times.push(ms(s.startedAt), ms(s.completedAt)); });
  d.attempts.forEach(function (a) { times.push(ms(a.at)); });
  var t0 = Math.min.apply(null, times);
  var t1 = Math.max.apply(null, times.concat(live ? [Date.now()] : []));
  var span = Math.max(1, t1 - t0);
  var gaps = d.resumePoints.map(function (p) { return { from: ms(p.idleFrom), to: ms(p.resumedAt), p: p }; })
    .filter(function (g) { return g.to - g.from > 0.12 * span; })
    .sort(function (a, b) { return a.from - b.from; })
    .filter(function (g, i, all) { return i === 0 || g.from >= all[i - 1].to; });
  var x = axis(t0, t1, gaps);

  var root = h('div', { class: 'gantt', role: 'img', 'aria-label': 'Timeline of ' + d.steps.length + ' steps' });
  // Flag lane and axis.
  var flags = h('div', { class: 'g-track' });
  root.appendChild(h('div', { class: 'g-row' }, [h('div', { class: 'g-label muted' }, ''), flags]));
  var ticks = h('div', { class: 'g-track g-axis' });
  var step = niceStep(span - gaps.reduce(function (s, g) { return s + g.to - g.from; }, 0));
  for (var t = 0; t0 + t <= t1; t += step) {
    var at = t0 + t;
    if (gaps.some(function (g) { return at > g.from - step / 3 && at < g.to + step / 3; }) && t !== 0) continue;
    ticks.appendChild(place(h('span', { class: 'tick' + (t === 0 ? ' first' : '') }, t === 0 ? '0' : '+' + fmtTick(t)), x(at)));
  }
  gaps.forEach(function (g) {
    ticks.appendChild(place(h('span', { class: 'tick gap-label', title: 'time between the last checkpoint and the resumed step (not to scale)' }, 'gap ' + fmtDuration(g.to - g.from)), (x(g.from) + x(g.to)) / 2));
  });
  root.appendChild(h('div', { class: 'g-row' }, [h('div', { class: 'g-label muted' }, 'elapsed'), ticks]));

  var byKey = {};
  d.steps.forEach(function (s) { byKey[s.key] = s; });
  var failedByKey = {};
  d.failedSteps.forEach(function (f) { failedByKey[f.key] = f; });
  var cursorKey = live ? keyAt(d, d.run.cursor.agentIndex, d.run.cursor.stepIndex) : null;
  var lastEnd = d.steps.length ? ms(d.steps[d.steps.length - 1].completedAt) : ms(d.run.startedAt);

  d.agents.forEach(function (agent) {
    var done = agent.steps.filter(function (s) { return byKey[s.key]; }).length;
    root.appendChild(h('div', { class: 'g-row g-agent' }, [
      h('div', { class: 'g-label', title: agent.id }, [agent.id, ' ', h('span', { class: 'muted' }, done + '/' + agent.steps.length)]),
      h('div', { class: 'g-track' }),
    ]));
    agent.steps.forEach(function (ps) {
      var s = byKey[ps.key], f = failedByKey[ps.key];
      var track = h('div', { class: 'g-track' });
      var label = h('div', { class: 'g-label' + (s || f || ps.key === cursorKey ? '' : ' g-pending'), title: ps.key }, [h('span', { class: 'seq' }, s ? '#' + s.sequence : ''), ps.name]);
      if (s) {
        var kind = s.retried ? 'retried' : s.origin;
        var left = x(ms(s.startedAt)), right = x(ms(s.completedAt));
        var title = '#' + s.sequence + ' ' + s.key + '\n' + fmtDuration(s.durationMs) + ', attempt ' + s.attempt + '\n' +
          (s.origin === 'copied' ? 'copied from the source run by a fork' : s.origin === 'restored' ? 'recorded by session ' + s.session + ', restored from its checkpoint on resume' : 'executed by session ' + s.session) +
          (s.sideEffectsCommitted ? '\nside effects committed' : '') +
          (s.ai ? '\nai: ' + s.ai.modelCalls + ' model call(s), ' + (s.ai.inputTokens + s.ai.outputTokens) + ' tokens' + (s.ai.reused.modelCalls ? ', ' + s.ai.reused.modelCalls + ' reused on resume' : '') : '');
        track.appendChild(place(h('div', { class: 'bar ' + kind, 'data-seq': s.sequence, 'data-kind': kind, title: title, onclick: function () { view.select(s.sequence); } }), left, right - left));
        track.appendChild(barNote(right, fmtDuration(s.durationMs) + (s.retried ? ' \u00B7 attempt ' + s.attempt : '') + (s.sideEffectsCommitted ? ' \u00B7 side effect' : '') + (s.ai ? ' \u00B7 ' + (s.ai.inputTokens + s.ai.outputTokens) + ' tokens' : '')));
      } else if (f) {
        var first = d.attempts.filter(function (a) { return a.stepKey === f.key; }).map(function (a) { return ms(a.at); });
        var from = Math.max.apply(null, d.steps.map(function (x2) { return ms(x2.completedAt); }).filter(function (v) { return v <= first[0]; }).concat([ms(d.run.startedAt)]));
        var fl = x(from), fr = x(ms(f.lastAt));
        track.appendChild(place(h('div', { class: 'bar failed', 'data-kind': 'failed', title: f.key + '\n' + f.attempts + ' failed attempt(s)\n' + errorText(f.lastError) }), fl, fr - fl));
        track.appendChild(barNote(fr, 'failed \u00D7' + f.attempts));
      } else if (ps.key === cursorKey) {
        var il = x(lastEnd), ir = x(t1);
        track.appendChild(place(h('div', { class: 'bar running', 'data-kind': 'running', title: ps.key + ' is running (not checkpointed yet)' }), il, ir - il));
        track.appendChild(barNote(ir, 'running ' + fmtDuration(t1 - lastEnd)));
      }
      d.attempts.filter(function (a) { return a.stepKey === ps.key; }).forEach(function (a) {
        track.appendChild(place(h('span', { class: 'attempt-mark', title: 'attempt ' + a.attempt + ' failed (session ' + a.session + ')\n' + errorText(a.error) }, '\u2715'), x(ms(a.at))));
      });
      root.appendChild(h('div', { class: 'g-row', 'data-step': ps.key }, [label, track]));
    });
  });

  var overlay = h('div', { class: 'g-overlay' });
  gaps.forEach(function (g) {
    var l = x(g.from), r = x(g.to);
    overlay.appendChild(place(h('div', { class: 'gap-break', title: fmtDuration(g.to - g.from) + ' between the last checkpoint and the resumed step, not to scale' }), l, r - l));
  });
  d.resumePoints.forEach(function (p) {
    var px = x(ms(p.resumedAt));
    overlay.appendChild(place(h('div', { class: 'resume-line', title: resumeText(p) }), px));
    var flag = h('span', { class: 'resume-flag' + (px > 60 ? ' left' : ''), 'data-resume-session': p.session, title: resumeText(p) },
      (p.reason === 'fork' ? 'forked, resumed' : 'resumed') + ' \u00B7 session ' + p.session + ' \u00B7 after ' + fmtDuration(p.gapMs));
    flags.appendChild(place(flag, px));
  });
  root.appendChild(overlay);
  return root;
}

/** Rows the runtime writes for itself are not steps: say what each one is. */
function systemRowText(r) {
  if (r.kind === 'base') return '#' + r.sequence + ' is a base snapshot (written by retention, a checkpoint migration or a fork): the steps folded into it are not shown.';
  if (r.kind === 'patch') return '#' + r.sequence + ' is a state patch (patchState of a fork), applied before the next step.';
  return '#' + r.sequence + ' is a ' + r.kind + ' row written by the runtime.';
}

/** Axis labels: whole seconds without decimals. */
function fmtTick(t) {
  return t >= 1000 && t < 60000 && t % 1000 === 0 ? t / 1000 + ' s' : fmtDuration(t);
}

function barNote(at, text) {
  var note = h('span', { class: 'bar-note' }, text);
  note.style.left = 'calc(' + at.toFixed(3) + '% + 6px)';
  return note;
}
`;
