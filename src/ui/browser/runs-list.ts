/** Page script: the runs list (`#/`, filtered by `?status=` and `?pipeline=`). */

/* exported showList */

const STATUS_FILTERS: readonly (readonly [value: string, label: string])[] = [
  ['', 'All'],
  ['running,waiting', 'Active'],
  ['running', 'Running'],
  ['waiting', 'Waiting'],
  ['paused', 'Paused'],
  ['failed', 'Failed'],
  ['completed', 'Completed'],
  ['cancelled', 'Cancelled'],
];

function showList(params: URLSearchParams): void {
  const token = viewToken;
  document.title = 'Waypoint runs';
  const status = params.get('status') || '';
  const pipeline = params.get('pipeline') || '';
  const statusSel = h(
    'select',
    { id: 'filter-status' },
    STATUS_FILTERS.map((f) => h('option', { value: f[0], selected: f[0] === status }, f[1])),
  );
  const datalist = h('datalist', { id: 'pipeline-names' });
  const pipeInput = h('input', { id: 'filter-pipeline', type: 'text', list: 'pipeline-names', placeholder: 'any pipeline', value: pipeline });
  function apply(): void {
    const p = new URLSearchParams();
    if (statusSel.value) p.set('status', statusSel.value);
    if (pipeInput.value.trim()) p.set('pipeline', pipeInput.value.trim());
    const next = '#/' + (p.toString() ? '?' + p.toString() : '');
    if (next === location.hash) route();
    else location.hash = next;
  }
  statusSel.addEventListener('change', apply);
  pipeInput.addEventListener('change', apply);
  const holder = h('div', { class: 'card', id: 'runs' }, h('p', { class: 'muted' }, 'Loading runs...'));
  app.replaceChildren(
    h('h1', null, 'Runs'),
    h('div', { class: 'toolbar' }, [
      h('label', null, ['Status', statusSel]),
      h('label', null, ['Pipeline', pipeInput]),
      datalist,
      h('button', { type: 'button', onclick: apply }, 'Refresh'),
    ]),
    holder,
  );
  const query = new URLSearchParams();
  if (status) query.set('status', status);
  if (pipeline) query.set('pipeline', pipeline);
  function load(): void {
    request<RunListView>('api/runs' + (query.toString() ? '?' + query.toString() : ''))
      .then((r) => {
        if (token !== viewToken) return;
        if (r.text !== lastBody) {
          lastBody = r.text;
          datalist.replaceChildren(...pipelineOptions(r.body));
          holder.replaceChildren(runsTable(r.body));
        }
        setLive(r.body.active);
        if (r.body.active) schedule(load);
      })
      .catch((err: unknown) => {
        if (token !== viewToken) return;
        holder.replaceChildren(notice('error', messageOf(err)));
      });
  }
  load();
}

/** The pipeline filter's suggestions: every pipeline the server knows or a listed run names, sorted, once each. */
function pipelineOptions(list: RunListView): HTMLElement[] {
  const names: Record<string, true> = {};
  list.pipelines.concat(list.runs.map((x) => x.pipeline)).forEach((n) => {
    names[n] = true;
  });
  return Object.keys(names)
    .sort()
    .map((n) => h('option', { value: n }));
}

function runsTable(list: RunListView): HTMLElement {
  if (list.runs.length === 0) return h('p', { class: 'empty' }, 'No runs match these filters.');
  const rows = list.runs.map((run) => {
    const link = h('a', { href: '#/runs/' + encodeURIComponent(run.runId), class: 'mono run-link' }, run.runId);
    const statusCell = h('td', null, [
      badge(run.status),
      ' ',
      run.lease && run.lease.expired ? tag('failed', 'lease expired', 'its executor stopped renewing the lease: it probably died') : null,
    ]);
    return h('tr', { 'data-run-id': run.runId }, [
      h('td', null, link),
      statusCell,
      h('td', null, [run.pipeline, ' ', h('span', { class: 'muted' }, '@' + run.version)]),
      h('td', null, progressEl(run.progress)),
      h('td', null, timeEl(run.startedAt)),
      h('td', null, timeEl(run.updatedAt)),
    ]);
  });
  const more = list.runs.length >= list.limit ? h('p', { class: 'muted' }, 'Showing the ' + list.limit + ' most recently updated runs.') : null;
  return h('div', null, [
    h('table', { class: 'runs' }, [
      h(
        'thead',
        null,
        h(
          'tr',
          null,
          ['Run', 'Status', 'Pipeline', 'Progress', 'Started', 'Updated'].map((t) => h('th', null, t)),
        ),
      ),
      h('tbody', null, rows),
    ]),
    more,
  ]);
}
