/**
 * Page script, part 2: the run page (header, integrity, actions, steps, side effects, failed attempts)
 * and the time-travel panel. The timeline itself is part 3.
 */
export const RUN_JS = String.raw`
function showRun(runId, params) {
  var token = viewToken;
  document.title = runId + ' - Waypoint';
  var wanted = params.get('seq');
  var view = { runId: runId, detail: null, seq: wanted !== null && /^\d+$/.test(wanted) ? Number(wanted) : null, cache: {}, message: null };
  app.replaceChildren(crumbs(runId), h('p', { class: 'muted' }, 'Loading run...'));
  function load() {
    request(runPath(runId)).then(function (r) {
      if (token !== viewToken) return;
      if (r.text !== lastBody) {
        lastBody = r.text;
        var previous = view.detail;
        view.detail = r.body;
        // Follow the newest checkpoint while the run moves, unless the person picked an older one.
        if (view.seq === null || (previous && view.seq === previous.checkpoints.latest)) view.seq = r.body.checkpoints.latest;
        renderRun(view);
      }
      var active = isActive(r.body.run.status);
      setLive(active);
      if (active) schedule(load);
    }).catch(function (err) {
      if (token !== viewToken) return;
      app.replaceChildren(crumbs(runId), notice('error', err.message));
    });
  }
  view.reload = function (message) { view.message = message || null; lastBody = null; stopTimer(); load(); };
  load();
}

function crumbs(runId) {
  return h('nav', { class: 'crumbs' }, [h('a', { href: '#/' }, 'Runs'), ' / ', h('span', { class: 'mono' }, runId)]);
}

function renderRun(view) {
  var d = view.detail;
  var scroll = window.scrollY;
  var travel = timeTravelCard(view);
  view.select = function (seq) { travel.select(seq); };
  app.replaceChildren(
    crumbs(d.run.runId),
    headerCard(view),
    timelineCard(view),
    stepsCard(view),
    operationsCard(d),
    travel.el
  );
  window.scrollTo(0, scroll);
}

function createdByText(meta) {
  if (!Object.keys(meta).length) return '-';
  var text = (meta.worker || 'process') + (meta.host ? ' on ' + meta.host : '') + (meta.pid ? ', pid ' + meta.pid : '');
  return h('span', { title: Object.keys(meta).map(function (k) { return k + ': ' + meta[k]; }).join('\n') }, text);
}

function fact(label, value) { return h('div', null, [h('dt', null, label), h('dd', null, value)]); }

function headerCard(view) {
  var d = view.detail, run = d.run;
  var resumes = d.resumePoints.length;
  var last = d.steps.length ? ms(d.steps[d.steps.length - 1].completedAt) : null;
  var elapsed = (isActive(run.status) ? Date.now() : Math.max(ms(run.updatedAt), last || 0)) - ms(run.startedAt);
  var origin = run.forkedFrom
    ? h('a', { href: '#/runs/' + encodeURIComponent(run.forkedFrom.runId) }, run.forkedFrom.runId + ' @ ' + run.forkedFrom.atSequence)
    : createdByText(run.createdBy);
  var lease = run.lease ? [run.lease.owner, ' ', run.lease.expired ? tag('failed', 'expired', 'lease ran out ' + run.lease.expiresAt + ': the executor probably died') : tag('executed', 'live')] : 'none';
  var facts = h('dl', { class: 'facts' }, [
    fact('Pipeline', [run.pipeline, ' ', h('span', { class: 'muted' }, '@' + run.version)]),
    fact('Progress', progressEl(run.progress)),
    fact('Started', timeEl(run.startedAt)),
    fact('Updated', timeEl(run.updatedAt)),
    fact('Elapsed', fmtDuration(elapsed)),
    fact('Sessions', d.sessions + (resumes ? ' (resumed ' + (resumes === 1 ? 'once' : resumes + ' times') + ')' : '')),
    fact('Executor lease', lease),
    fact(run.forkedFrom ? 'Forked from' : 'Created by', origin),
  ]);
  var children = [
    h('h1', null, [h('span', { class: 'mono' }, run.runId), badge(run.status)]),
    facts,
    // A failed run's hint repeats its error, which is shown right below.
    run.resumeHint && !(run.status === 'failed' && run.error) ? h('p', { class: 'hint' }, run.resumeHint) : null,
    run.error ? notice('error', 'Run error: ' + errorText(run.error)) : null,
    integrityNotice(d.integrity),
    view.message ? notice(view.message.kind, view.message.text) : null,
    actionsRow(view),
  ];
  return h('section', { class: 'card', id: 'run-header' }, children);
}

function integrityNotice(i) {
  var seal = i.seal === 'hmac' ? 'HMAC-SHA-256' : 'SHA-256';
  if (i.status === 'verified') return h('div', { class: 'notice ok', id: 'integrity', 'data-integrity': i.status }, 'Integrity verified: ' + i.rows + ' checkpoint rows, every ' + seal + ' matches.');
  if (i.status === 'empty') return h('div', { class: 'notice warn', id: 'integrity', 'data-integrity': i.status }, 'No checkpoints recorded yet.');
  var kind = i.status === 'corrupted' ? 'error' : 'warn';
  return h('div', { class: 'notice ' + kind, id: 'integrity', 'data-integrity': i.status, role: 'alert' }, (i.status === 'corrupted' ? 'Integrity check failed at sequence ' + i.sequence + ': ' : 'Integrity not verified: ') + i.message);
}

function actionsRow(view) {
  var d = view.detail;
  if (!d.actions.allowed) return null;
  function act(name, payload, confirmText) {
    return function () {
      if (confirmText && !window.confirm(confirmText)) return;
      post(runPath(d.run.runId) + '/' + name, payload).then(function (r) {
        var text = name === 'resume' ? (r.body.accepted ? 'Resume started; the page follows it.' : 'Resumed: ' + r.body.status + ', ' + r.body.stepsExecuted + ' step(s) executed.') : 'Run cancelled.';
        view.reload({ kind: 'ok', text: text });
      }).catch(function (err) { view.reload({ kind: 'error', text: name + ' failed: ' + err.message }); });
    };
  }
  return h('div', { class: 'actions' }, [
    h('button', { type: 'button', class: 'primary', id: 'action-resume', disabled: !d.actions.resume, onclick: act('resume', {}) }, 'Resume'),
    h('button', { type: 'button', class: 'danger', id: 'action-cancel', disabled: !d.actions.cancel, onclick: act('cancel', {}, 'Cancel run ' + d.run.runId + '? A cancelled run is never resumed.') }, 'Cancel run'),
    h('span', { class: 'muted' }, 'Fork from any checkpoint in the time-travel panel below.'),
  ]);
}

function stepStatusTags(s) {
  return [tag(s.origin, s.origin, s.origin === 'restored' ? 'recorded by session ' + s.session + ', restored from its checkpoint on resume' : s.origin === 'copied' ? 'copied from the source run by a fork' : 'executed by session ' + s.session), s.retried ? tag('retried', 'retried') : null];
}

/** Model calls and tokens of a step (waypoint/ai), with what a resume did not repeat. */
function aiTag(ai) {
  var n = function (v) { return v.toLocaleString('en-US'); };
  var text = 'ai: ' + n(ai.modelCalls) + ' model call(s), ' + n(ai.inputTokens + ai.outputTokens) + ' tokens, ' + n(ai.toolCalls) + ' tool call(s)';
  var saved = ai.reused.modelCalls + ai.reused.toolCalls > 0 ? '; not repeated on resume: ' + n(ai.reused.modelCalls) + ' model call(s), ' + n(ai.reused.inputTokens + ai.reused.outputTokens) + ' tokens, ' + n(ai.reused.toolCalls) + ' tool call(s)' : '';
  return h('span', { class: 'tag committed ai-usage', title: n(ai.inputTokens) + ' input + ' + n(ai.outputTokens) + ' output tokens' }, text + saved);
}

function stepsCard(view) {
  var d = view.detail;
  var rows = [];
  var points = d.resumePoints.slice();
  d.steps.forEach(function (s) {
    points.filter(function (p) { return p.beforeSequence === s.sequence; }).forEach(function (p) { rows.push(resumeRow(p)); });
    var effects = d.sideEffects.filter(function (e) { return e.stepKey === s.key && !(s.ai && e.state === 'committed' && e.name.indexOf('durable:ai:') === 0); });
    var tr = h('tr', { 'data-seq': s.sequence, class: s.sequence === view.seq ? 'selected' : null, onclick: function () { view.select(s.sequence); } }, [
      h('td', { class: 'num' }, s.sequence),
      h('td', null, [h('span', { class: 'muted' }, s.agentId + ' / '), s.name]),
      h('td', null, timeEl(s.startedAt)),
      h('td', { class: 'num' }, fmtDuration(s.durationMs)),
      h('td', { class: 'num' }, s.attempt),
      h('td', null, stepStatusTags(s)),
      h('td', null, (s.ai ? [aiTag(s.ai)] : []).concat(effects.map(function (e) { return tag(e.state, e.name + ': ' + e.state); }))),
    ]);
    rows.push(tr);
  });
  points.filter(function (p) { return p.beforeSequence === null; }).forEach(function (p) { rows.push(resumeRow(p)); });
  d.failedSteps.forEach(function (f) {
    rows.push(h('tr', { class: 'failed-step' }, [
      h('td', { class: 'num muted' }, '-'),
      h('td', null, [h('span', { class: 'muted' }, f.agentId + ' / '), f.name]),
      h('td', null, timeEl(f.lastAt)),
      h('td', { class: 'num' }, '-'),
      h('td', { class: 'num' }, f.attempts),
      h('td', null, tag('failed', 'failed')),
      h('td', { class: 'error-text' }, errorText(f.lastError)),
    ]));
  });
  if (rows.length === 0) rows.push(h('tr', null, h('td', { colspan: 7, class: 'empty' }, 'No steps recorded yet.')));
  return h('section', { class: 'card', id: 'steps' }, [
    h('h2', null, 'Steps'),
    h('table', { class: 'steps-table' }, [
      h('thead', null, h('tr', null, ['Seq', 'Step', 'Started', 'Duration', 'Attempt', 'Status', 'Side effects'].map(function (t, i) { return h('th', { class: i === 0 || i === 3 || i === 4 ? 'num' : null }, t); }))),
      h('tbody', null, rows),
    ]),
  ]);
}

function resumeText(p) {
  var why = p.reason === 'fork' ? 'a fork of this run was resumed' : p.reason === 'attempts' ? 'the step\'s attempt count restarted' : 'one of the largest gaps between steps, within the run\'s lease count';
  return (p.reason === 'fork' ? 'Forked run resumed' : 'Resumed') + ': session ' + p.session + ' started at ' + p.stepKey + ' after a gap of ' + fmtDuration(p.gapMs) + '; steps up to #' + p.afterSequence + ' restored from checkpoints (' + why + ').';
}

function resumeRow(p) {
  return h('tr', { class: 'resume-row' }, h('td', { colspan: 7 }, [tag('resume', 'resume point'), ' ', resumeText(p)]));
}

function operationsCard(d) {
  if (!d.sideEffects.length && !d.attempts.length && !d.signals.length) return h('span');
  var parts = [h('h2', null, 'Operations log')];
  if (d.sideEffects.length) {
    parts.push(h('h2', { class: 'subhead' }, 'Side effects'));
    parts.push(h('table', { id: 'side-effects' }, [
      h('thead', null, h('tr', null, ['Step', 'Operation', 'State', 'Tries', 'First started', 'Last change', 'Error'].map(function (t) { return h('th', null, t); }))),
      h('tbody', null, d.sideEffects.map(function (e) {
        return h('tr', null, [h('td', null, e.stepKey), h('td', { class: 'mono' }, e.name), h('td', null, tag(e.state)), h('td', { class: 'num' }, e.attempts), h('td', null, timeEl(e.createdAt)), h('td', null, timeEl(e.updatedAt)), h('td', { class: 'error-text' }, errorText(e.error))]);
      })),
    ]));
  }
  if (d.attempts.length) {
    parts.push(h('h2', { class: 'subhead' }, 'Failed attempts'));
    parts.push(h('table', { id: 'attempts' }, [
      h('thead', null, h('tr', null, ['Step', 'Attempt', 'Session', 'Failed at', 'Error'].map(function (t) { return h('th', null, t); }))),
      h('tbody', null, d.attempts.map(function (a) {
        return h('tr', null, [h('td', null, a.stepKey), h('td', { class: 'num' }, a.attempt), h('td', { class: 'num' }, a.session), h('td', null, timeEl(a.at)), h('td', { class: 'error-text' }, errorText(a.error))]);
      })),
    ]));
  }
  if (d.signals.length) {
    parts.push(h('h2', { class: 'subhead' }, 'Signals delivered'));
    parts.push(h('ul', null, d.signals.map(function (s) { return h('li', null, [h('span', { class: 'mono' }, s.name), ' at ', timeEl(s.at)]); })));
  }
  return h('section', { class: 'card', id: 'operations' }, parts);
}

function keyAt(d, agentIndex, stepIndex) {
  if (d.planKnown) {
    if (agentIndex >= d.agents.length) return 'end of pipeline';
    var a = d.agents[agentIndex];
    if (a && a.steps[stepIndex]) return a.steps[stepIndex].key;
  }
  var s = d.steps.filter(function (x) { return x.agentIndex === agentIndex && x.stepIndex === stepIndex; })[0];
  return s ? s.key : 'agent ' + agentIndex + ', step ' + stepIndex;
}

function timeTravelCard(view) {
  var d = view.detail;
  var lo = d.checkpoints.oldest, hi = d.checkpoints.latest;
  var seq = Math.min(hi, Math.max(lo, view.seq === null ? hi : view.seq));
  var slider = h('input', { type: 'range', id: 'tt-slider', min: lo, max: hi, step: 1, value: seq, 'aria-label': 'Checkpoint sequence' });
  var label = h('strong', { id: 'tt-seq', class: 'num' });
  var body = h('div', { id: 'tt-body' });
  var caption = h('p', { class: 'tt-caption' });
  var forkBox = null, forkId = null;
  if (d.actions.allowed) {
    forkId = h('input', { type: 'text', id: 'fork-id', 'aria-label': 'New run id' });
    forkBox = h('div', { class: 'actions' }, [forkId, h('button', { type: 'button', id: 'action-fork', onclick: function () { fork(); } }, 'Fork from this checkpoint')]);
  }
  function fork() {
    post(runPath(d.run.runId) + '/fork', { newRunId: forkId.value.trim(), fromSequence: Number(slider.value) }).then(function (r) {
      location.hash = '#/runs/' + encodeURIComponent(r.body.run.runId);
    }).catch(function (err) { view.reload({ kind: 'error', text: 'Fork failed: ' + err.message }); });
  }
  var pending = 0;
  function select(n) {
    n = Math.min(hi, Math.max(lo, n));
    view.seq = n;
    slider.value = String(n);
    label.textContent = n + ' / ' + hi;
    if (forkId) forkId.value = d.run.runId + '-fork-' + n;
    var row = d.steps.filter(function (s) { return s.sequence === n; })[0];
    var sys = d.systemRows.filter(function (r) { return r.sequence === n; })[0];
    caption.textContent = n === 0 ? 'Before any step: the run input.' : row ? 'After step #' + n + ', ' + row.key + ' (' + row.origin + ').' : sys ? systemRowText(sys) : 'After sequence ' + n + '.';
    Array.prototype.forEach.call(document.querySelectorAll('[data-seq]'), function (el) { el.classList.toggle('selected', Number(el.getAttribute('data-seq')) === n); });
    var mine = ++pending;
    Promise.all([checkpoint(view, n), n > lo ? checkpoint(view, n - 1) : Promise.resolve(null)]).then(function (both) {
      if (mine !== pending) return;
      body.replaceChildren(checkpointBody(d, both[0], both[1]));
    }).catch(function (err) { if (mine === pending) body.replaceChildren(notice('error', err.message)); });
  }
  slider.addEventListener('input', function () { select(Number(slider.value)); });
  var el = h('section', { class: 'card', id: 'time-travel' }, [
    h('h2', null, 'Time travel'),
    h('div', { class: 'tt-controls' }, [
      h('button', { type: 'button', 'aria-label': 'Previous checkpoint', onclick: function () { select(Number(slider.value) - 1); } }, '\u25C0'),
      slider,
      h('button', { type: 'button', 'aria-label': 'Next checkpoint', onclick: function () { select(Number(slider.value) + 1); } }, '\u25B6'),
      h('span', null, ['Checkpoint ', label]),
    ]),
    caption,
    forkBox,
    body,
  ]);
  select(seq);
  return { el: el, select: select };
}

function checkpoint(view, n) {
  var d = view.detail;
  // Checkpoints before the latest never change; the latest may, while the run moves.
  var key = n + '@' + d.checkpoints.latest;
  if (!view.cache[key]) {
    view.cache[key] = request(runPath(d.run.runId) + '/checkpoints/' + n).then(function (r) { return r.body; });
    view.cache[key].catch(function () { delete view.cache[key]; });
  }
  return view.cache[key];
}

function checkpointBody(d, cur, prev) {
  var cp = cur.checkpoint;
  var state = cp.shared_context || {};
  var before = prev ? prev.checkpoint.shared_context || {} : null;
  var grid = h('div', { class: 'state-grid', id: 'tt-state' });
  Object.keys(state).sort().forEach(function (k) {
    var changed = before !== null && JSON.stringify(before[k]) !== JSON.stringify(state[k]);
    grid.appendChild(h('div', { class: 'state-key' + (changed ? ' changed' : '') }, [k, changed ? tag('retried', 'changed') : null]));
    grid.appendChild(h('div', null, h('pre', null, pretty(state[k]))));
  });
  // A failed run is terminal until resumed, but its cursor still names the step a resume retries.
  var ended = cp.is_terminal && d.run.status !== 'failed';
  var next = ended ? 'none (run ' + d.run.status + ')' : keyAt(d, cp.current_agent_index, cp.current_step_index);
  return h('div', null, [
    h('dl', { class: 'facts' }, [
      fact('Next step', next),
      fact('Completed steps', String(cp.completed_steps.length)),
      fact('Checkpoint written', cp.checkpoint_sequence === 0 ? '-' : timeEl(cp.created_at)),
      fact('Version', cp.pipeline_version),
    ]),
    h('h2', { class: 'subhead' }, 'Shared state'),
    Object.keys(state).length ? grid : h('p', { class: 'muted' }, 'Empty.'),
    h('details', null, [h('summary', null, 'Agent memories (' + Object.keys(cp.agent_memory_snapshots).length + ')'), h('pre', null, pretty(cp.agent_memory_snapshots))]),
  ]);
}
`;
