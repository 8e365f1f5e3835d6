/**
 * Page script, part 1: DOM and fetch helpers, formatting, hash routing, and the runs list. Plain ES2020
 * without template literals (this file is itself one); everything is built with createElement and
 * textContent, so run data is never parsed as HTML.
 */
export const CORE_JS = String.raw`
var app = document.getElementById('app');
var liveEl = document.getElementById('live');
var timer = null;
var lastBody = null;
var viewToken = 0;
var REFRESH_MS = 2000;
var ACTIVE = { running: true, waiting: true };

function h(tag, attrs, children) {
  var el = document.createElement(tag);
  if (attrs) Object.keys(attrs).forEach(function (k) {
    var v = attrs[k];
    if (v === null || v === undefined || v === false) return;
    if (k === 'class') el.className = v;
    else if (k === 'text') el.textContent = v;
    else if (k.slice(0, 2) === 'on') el.addEventListener(k.slice(2), v);
    else el.setAttribute(k, v === true ? '' : String(v));
  });
  add(el, children);
  return el;
}
function add(el, children) {
  if (children === null || children === undefined) return el;
  (Array.isArray(children) ? children : [children]).forEach(function (c) {
    if (c === null || c === undefined || c === false) return;
    el.appendChild(typeof c === 'object' ? c : document.createTextNode(String(c)));
  });
  return el;
}

function request(path, init) {
  return fetch(path, Object.assign({ credentials: 'same-origin', headers: { accept: 'application/json' } }, init || {})).then(function (res) {
    return res.text().then(function (text) {
      var body = null;
      try { body = text ? JSON.parse(text) : null; } catch (e) { body = null; }
      if (!res.ok) {
        var err = new Error(body && body.error ? body.error.message : 'The server answered HTTP ' + res.status + '.');
        err.status = res.status;
        err.code = body && body.error ? body.error.code : null;
        throw err;
      }
      return { body: body, text: text };
    });
  });
}
function post(path, payload) {
  return request(path, { method: 'POST', headers: { 'content-type': 'application/json', accept: 'application/json' }, body: JSON.stringify(payload || {}) });
}
function runPath(runId) { return 'api/runs/' + encodeURIComponent(runId); }

function schedule(fn) { stopTimer(); timer = setTimeout(fn, REFRESH_MS); }
function stopTimer() { if (timer !== null) clearTimeout(timer); timer = null; }
function setLive(on) { liveEl.hidden = !on; }
function isActive(status) { return ACTIVE[status] === true; }

function ms(iso) { return new Date(iso).getTime(); }
function fmtDuration(v) {
  if (v === null || v === undefined || isNaN(v)) return '-';
  if (v < 1000) return Math.round(v) + ' ms';
  var s = v / 1000;
  if (s < 60) return (s < 10 ? s.toFixed(2) : s.toFixed(1)) + ' s';
  var m = Math.floor(s / 60);
  if (m < 60) return m + ' min ' + Math.round(s % 60) + ' s';
  var hr = Math.floor(m / 60);
  if (hr < 24) return hr + ' h ' + (m % 60) + ' min';
  return Math.floor(hr / 24) + ' d ' + (hr % 24) + ' h';
}
function fmtTime(iso) {
  var d = new Date(iso);
  var time = d.toLocaleTimeString([], { hour: '2-digit', minute: '2-digit', second: '2-digit', hour12: false });
  if (d.toDateString() === new Date().toDateString()) return time;
  return d.toLocaleDateString([], { year: 'numeric', month: 'short', day: 'numeric' }) + ' ' + time;
}
function timeEl(iso) { return h('time', { datetime: iso, title: iso }, fmtTime(iso)); }
function badge(status) { return h('span', { class: 'badge st-' + status, 'data-status': status }, status); }
function tag(kind, text, title) { return h('span', { class: 'tag ' + kind, title: title || null }, text || kind); }
function notice(kind, text) { return h('div', { class: 'notice ' + kind, role: kind === 'error' ? 'alert' : null }, text); }
function errorText(e) { return e ? (e.code ? e.code + ': ' : (e.name && e.name !== 'Error' ? e.name + ': ' : '')) + e.message : ''; }
function pretty(value) { return JSON.stringify(value, null, 2); }

function progressEl(p) {
  var pct = p.total ? Math.round((100 * p.done) / p.total) : null;
  var fill = h('div', { class: 'progress-fill' });
  fill.style.width = (pct === null ? 100 : pct) + '%';
  if (pct === null) fill.style.opacity = '0.35';
  var label = p.total === null ? p.done + ' recorded' : p.done + ' / ' + p.total;
  return h('div', { class: 'progress', title: p.basis === 'plan' ? 'steps done / steps in the pipeline' : 'pipeline not registered with the UI: recorded steps' }, [
    h('div', { class: 'progress-track' }, fill),
    h('span', { class: 'num' }, label),
  ]);
}

function route() {
  stopTimer();
  setLive(false);
  lastBody = null;
  viewToken += 1;
  var hash = location.hash || '#/';
  var m = /^#\/runs\/([^?]+)(?:\?(.*))?$/.exec(hash);
  if (m) {
    var id;
    try { id = decodeURIComponent(m[1]); } catch (e) { id = m[1]; }
    showRun(id, new URLSearchParams(m[2] || ''));
    return;
  }
  var q = hash.indexOf('?');
  showList(new URLSearchParams(q >= 0 ? hash.slice(q + 1) : ''));
}

var STATUS_FILTERS = [['', 'All'], ['running,waiting', 'Active'], ['running', 'Running'], ['waiting', 'Waiting'], ['paused', 'Paused'], ['failed', 'Failed'], ['completed', 'Completed'], ['cancelled', 'Cancelled']];

function showList(params) {
  var token = viewToken;
  document.title = 'Waypoint runs';
  var status = params.get('status') || '';
  var pipeline = params.get('pipeline') || '';
  var statusSel = h('select', { id: 'filter-status' }, STATUS_FILTERS.map(function (f) {
    return h('option', { value: f[0], selected: f[0] === status }, f[1]);
  }));
  var datalist = h('datalist', { id: 'pipeline-names' });
  var pipeInput = h('input', { id: 'filter-pipeline', type: 'text', list: 'pipeline-names', placeholder: 'any pipeline', value: pipeline });
  function apply() {
    var p = new URLSearchParams();
    if (statusSel.value) p.set('status', statusSel.value);
    if (pipeInput.value.trim()) p.set('pipeline', pipeInput.value.trim());
    var next = '#/' + (p.toString() ? '?' + p.toString() : '');
    if (next === location.hash) route(); else location.hash = next;
  }
  statusSel.addEventListener('change', apply);
  pipeInput.addEventListener('change', apply);
  var holder = h('div', { class: 'card', id: 'runs' }, h('p', { class: 'muted' }, 'Loading runs...'));
  app.replaceChildren(
    h('h1', null, 'Runs'),
    h('div', { class: 'toolbar' }, [
      h('label', null, ['Status', statusSel]),
      h('label', null, ['Pipeline', pipeInput]),
      datalist,
      h('button', { type: 'button', onclick: apply }, 'Refresh'),
    ]),
    holder
  );
  var query = new URLSearchParams();
  if (status) query.set('status', status);
  if (pipeline) query.set('pipeline', pipeline);
  function load() {
    request('api/runs' + (query.toString() ? '?' + query.toString() : '')).then(function (r) {
      if (token !== viewToken) return;
      if (r.text !== lastBody) {
        lastBody = r.text;
        var names = {};
        r.body.pipelines.concat(r.body.runs.map(function (x) { return x.pipeline; })).forEach(function (n) { names[n] = true; });
        datalist.replaceChildren.apply(datalist, Object.keys(names).sort().map(function (n) { return h('option', { value: n }); }));
        holder.replaceChildren(runsTable(r.body));
      }
      setLive(r.body.active);
      if (r.body.active) schedule(load);
    }).catch(function (err) {
      if (token !== viewToken) return;
      holder.replaceChildren(notice('error', err.message));
    });
  }
  load();
}

function runsTable(list) {
  if (list.runs.length === 0) return h('p', { class: 'empty' }, 'No runs match these filters.');
  var rows = list.runs.map(function (run) {
    var link = h('a', { href: '#/runs/' + encodeURIComponent(run.runId), class: 'mono run-link' }, run.runId);
    var statusCell = h('td', null, [badge(run.status), ' ', run.lease && run.lease.expired ? tag('failed', 'lease expired', 'its executor stopped renewing the lease: it probably died') : null]);
    return h('tr', { 'data-run-id': run.runId }, [
      h('td', null, link),
      statusCell,
      h('td', null, [run.pipeline, ' ', h('span', { class: 'muted' }, '@' + run.version)]),
      h('td', null, progressEl(run.progress)),
      h('td', null, timeEl(run.startedAt)),
      h('td', null, timeEl(run.updatedAt)),
    ]);
  });
  var more = list.runs.length >= list.limit ? h('p', { class: 'muted' }, 'Showing the ' + list.limit + ' most recently updated runs.') : null;
  return h('div', null, [
    h('table', { class: 'runs' }, [
      h('thead', null, h('tr', null, ['Run', 'Status', 'Pipeline', 'Progress', 'Started', 'Updated'].map(function (t) { return h('th', null, t); }))),
      h('tbody', null, rows),
    ]),
    more,
  ]);
}
`;
