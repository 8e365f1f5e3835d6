/**
 * Page script: the timeline of a control-flow run, drawn from the tree the server built (src/ui/flow-view.ts):
 * parallel lanes on a shared time axis, loop iterations with their stop/continue decision, the branch case
 * chosen, forEach items grouped with counts (collapsed, and drawn a page at a time when opened).
 */

/* exported flowTree */

/** Items drawn per page of an opened forEach group. */
const ITEM_PAGE = 50;
/** A forEach with more items than this starts collapsed. */
const OPEN_UP_TO = 20;

/** What the person opened or paged in, by group path, kept across the refreshes of one run page. */
let flowMemory: { runId: string; open: Record<string, boolean>; shown: Record<string, number> } = { runId: '', open: {}, shown: {} };

function flowTree(view: RunView, d: RunDetailView, flow: FlowView): HTMLElement {
  if (flowMemory.runId !== d.run.runId) flowMemory = { runId: d.run.runId, open: {}, shown: {} };
  const bySeq: Record<number, StepView | undefined> = {};
  d.flowSteps.concat(d.steps).forEach((s) => {
    bySeq[s.sequence] = s;
  });
  const root = h(
    'div',
    { class: 'flow' },
    flow.root.map((n) => flowNode(view, bySeq, n)),
  );
  if (!flow.root.length) root.appendChild(h('p', { class: 'empty' }, 'No steps recorded yet.'));
  if (flow.otherChildren.length) {
    root.appendChild(
      h('div', { class: 'f-group' }, [
        h('div', { class: 'f-head' }, 'Child runs'),
        h(
          'ul',
          { class: 'f-children' },
          flow.otherChildren.map((c) => h('li', null, childLink(c))),
        ),
      ]),
    );
  }
  return root;
}

function flowNode(view: RunView, bySeq: Record<number, StepView | undefined>, n: FlowNodeView): HTMLElement {
  switch (n.kind) {
    case 'step':
      return n.sequence === null ? failedStep(view, n) : flowStep(view, bySeq[n.sequence], n, n.sequence);
    case 'parallel':
      return parallelLanes(view, bySeq, n);
    case 'loop':
      return h('div', { class: 'f-group f-loop', 'data-label': n.label }, [
        h('div', { class: 'f-head' }, [h('span', { class: 'mono' }, n.label), ' ', h('span', { class: 'muted' }, iterationCount(n))]),
        ...n.iterations.map((it) =>
          h('div', { class: 'f-scope f-iteration', 'data-iteration': it.key }, [
            h('div', { class: 'f-scope-head' }, [
              'iteration ' + it.key,
              it.decision
                ? tag(it.decision === 'stop' ? 'committed' : 'executed', it.decision === 'stop' ? 'until: stop' : 'until: continue', 'the loop condition after iteration ' + it.key)
                : null,
            ]),
            children(view, bySeq, it.children),
          ]),
        ),
      ]);
    case 'branch':
      return h('div', { class: 'f-group f-branch', 'data-label': n.label, 'data-chosen': n.chosen ?? '' }, [
        h('div', { class: 'f-head' }, [
          h('span', { class: 'mono' }, n.label),
          ' ',
          n.chosen === null ? h('span', { class: 'muted' }, 'not decided yet') : h('span', { class: 'f-chosen' }, ['case chosen: ', tag('executed', n.chosen)]),
        ]),
        ...n.cases.map((c) => h('div', { class: 'f-scope', 'data-case': c.key }, [h('div', { class: 'f-scope-head' }, 'case ' + c.key), children(view, bySeq, c.children)])),
      ]);
    case 'forEach':
      return forEachGroup(view, bySeq, n);
    case 'group':
      return h('div', { class: 'f-group', 'data-label': n.label }, [
        h('div', { class: 'f-head mono' }, n.label),
        ...n.scopes.map((c) => h('div', { class: 'f-scope' }, [h('div', { class: 'f-scope-head' }, n.label + '[' + c.key + ']'), children(view, bySeq, c.children)])),
      ]);
  }
}

function children(view: RunView, bySeq: Record<number, StepView | undefined>, list: readonly FlowNodeView[]): HTMLElement {
  return h(
    'div',
    { class: 'f-children' },
    list.map((c) => flowNode(view, bySeq, c)),
  );
}

/** A step with failed attempts and no row: the one the run failed on (or is retrying). */
function failedStep(view: RunView, n: FlowStepNodeView): HTMLElement {
  const f = view.detail ? view.detail.failedSteps.filter((x) => x.key === n.path)[0] : undefined;
  return h('div', { class: 'f-step', 'data-path': n.path, 'data-status': 'failed', title: n.path }, [
    h('span', { class: 'seq' }, '-'),
    h('span', { class: 'mono' }, n.path),
    tag('failed', 'failed' + (f ? ' \u00D7' + f.attempts : '')),
    f ? h('span', { class: 'error-text' }, errorText(f.lastError)) : null,
  ]);
}

function flowStep(view: RunView, s: StepView | undefined, n: FlowStepNodeView, seq: number): HTMLElement {
  const kind = n.status === 'skipped' ? 'skipped' : !s ? 'executed' : s.retried ? 'retried' : s.origin;
  return h(
    'div',
    { class: 'f-step' + (view.seq === seq ? ' selected' : ''), 'data-seq': seq, 'data-path': n.path, 'data-status': n.status, title: n.path, onclick: () => view.select(seq) },
    [
      h('span', { class: 'seq' }, '#' + seq),
      s ? h('span', null, [h('span', { class: 'muted' }, s.agentId + ' / '), s.name]) : n.path,
      ' ',
      n.status === 'skipped' ? tag('skipped', 'skipped', 'its `when` said no') : tag(kind, kind),
      s && n.status !== 'skipped' ? h('span', { class: 'muted' }, ' ' + fmtDuration(s.durationMs)) : null,
    ],
  );
}

/** Lanes side by side on the parallel's own time axis, so branches that ran at the same time overlap. */
function parallelLanes(view: RunView, bySeq: Record<number, StepView | undefined>, n: ParallelView): HTMLElement {
  const t0 = n.startedAt ? ms(n.startedAt) : 0;
  const span = Math.max(1, (n.completedAt ? ms(n.completedAt) : t0) - t0);
  const lanes = n.lanes.map((lane) => {
    const track = h('div', { class: 'g-track' });
    stepsIn(lane.children).forEach((st) => {
      const s = st.sequence === null ? undefined : bySeq[st.sequence];
      if (!s) return;
      const left = ((ms(s.startedAt) - t0) / span) * 90;
      const width = ((ms(s.completedAt) - ms(s.startedAt)) / span) * 90;
      const kind = st.status === 'skipped' ? 'skipped' : s.retried ? 'retried' : s.origin;
      track.appendChild(
        place(
          h('div', {
            class: 'bar ' + kind,
            'data-seq': s.sequence,
            'data-kind': kind,
            title: '#' + s.sequence + ' ' + s.path + '\n' + fmtDuration(s.durationMs),
            onclick: () => view.select(s.sequence),
          }),
          left,
          width,
        ),
      );
    });
    return h('div', { class: 'g-row f-lane', 'data-lane': lane.key }, [
      h('div', { class: 'g-label' }, [
        'lane ' + lane.key,
        ' ',
        h(
          'span',
          { class: 'muted' },
          stepsIn(lane.children)
            .map((x) => x.path.split('/').slice(-2).join('/'))
            .join(', '),
        ),
      ]),
      track,
    ]);
  });
  return h('div', { class: 'f-group f-parallel', 'data-label': n.label }, [
    h('div', { class: 'f-head' }, [
      h('span', { class: 'mono' }, n.label),
      ' ',
      h('span', { class: 'muted' }, n.lanes.length + ' lanes, ' + fmtDuration(n.startedAt ? span : null)),
    ]),
    ...lanes,
  ]);
}

function stepsIn(list: readonly FlowNodeView[], out: FlowStepNodeView[] = []): FlowStepNodeView[] {
  list.forEach((n) => {
    if (n.kind === 'step') out.push(n);
    else if (n.kind === 'parallel') n.lanes.forEach((l) => stepsIn(l.children, out));
    else if (n.kind === 'loop') n.iterations.forEach((l) => stepsIn(l.children, out));
    else if (n.kind === 'branch') n.cases.forEach((l) => stepsIn(l.children, out));
    else if (n.kind === 'forEach') n.items.forEach((l) => stepsIn(l.children, out));
    else n.scopes.forEach((l) => stepsIn(l.children, out));
  });
  return out;
}

/** `3 iterations`, or for a long loop `20000 iterations, the newest 500 shown` (the server sends those). */
function iterationCount(n: LoopView): string {
  const all = n.hidden + n.iterations.length;
  return all + ' iteration' + (all === 1 ? '' : 's') + (n.hidden > 0 ? ', the newest ' + n.iterations.length + ' shown' : '');
}

function forEachGroup(view: RunView, bySeq: Record<number, StepView | undefined>, n: ForEachView): HTMLElement {
  const key = n.path;
  const summary = forEachSummary(n);
  const body = h('div', { class: 'f-items' });
  const details = h('details', { class: 'f-group f-foreach', 'data-label': n.label }, [summary, body]);
  const open = flowMemory.open[key] ?? n.items.length <= OPEN_UP_TO;
  const draw = () => {
    const shown = Math.min(n.items.length, flowMemory.shown[key] ?? ITEM_PAGE);
    body.replaceChildren(...n.items.slice(0, shown).map((it) => forEachItem(view, bySeq, it)));
    if (shown >= n.items.length && n.hidden > 0) body.appendChild(h('p', { class: 'muted' }, n.hidden + ' more item(s) recorded; the counts above include them.'));
    if (shown < n.items.length) {
      body.appendChild(
        h(
          'button',
          {
            type: 'button',
            class: 'f-more',
            onclick: () => {
              flowMemory.shown[key] = shown + ITEM_PAGE;
              draw();
            },
          },
          'Show ' + Math.min(ITEM_PAGE, n.items.length - shown) + ' more of ' + (n.items.length - shown) + ' remaining',
        ),
      );
    }
  };
  if (open) {
    details.open = true;
    draw();
  }
  // Items are drawn only once the group is opened: a forEach over 1,000 items stays one line until then.
  details.addEventListener('toggle', () => {
    flowMemory.open[key] = details.open;
    if (details.open && !body.firstChild) draw();
  });
  return details;
}

/** A forEach's one-line head: its label, item count, and a tag per item status that has items. */
function forEachSummary(n: ForEachView): HTMLElement {
  const c = n.counts;
  const count = (k: keyof ForEachView['counts'], text: string, kind: string) =>
    c[k] || k === 'completed' || k === 'notRecorded' ? h('span', { class: 'tag ' + kind, 'data-count': k }, c[k] + ' ' + text) : null;
  return h('summary', { class: 'f-head' }, [
    h('span', { class: 'mono' }, n.label),
    ' ',
    h(
      'span',
      { class: 'muted' },
      (n.total === null ? n.items.length + ' item(s) recorded' : n.total + ' item' + (n.total === 1 ? '' : 's')) + (n.childRuns ? ', each a child run' : '') + ': ',
    ),
    count('completed', 'completed', 'executed'),
    count('started', 'started', 'running'),
    count('queued', 'queued', 'pending'),
    count('failed', 'failed', 'failed'),
    count('skipped', 'skipped', 'skipped'),
    count('notRecorded', 'not yet recorded', 'pending'),
  ]);
}

/** One item of a forEach: its key, its status (or its child run's link), then its steps. */
function forEachItem(view: RunView, bySeq: Record<number, StepView | undefined>, it: ForEachView['items'][number]): HTMLElement {
  return h('div', { class: 'f-scope f-item', 'data-item': it.key, 'data-status': it.status }, [
    // A child run's own status badge says it all; an item of this run gets a tag.
    h('div', { class: 'f-scope-head' }, [
      'item ' + it.key,
      ' ',
      it.child ? childLink(it.child) : tag(it.status === 'completed' ? 'executed' : it.status === 'started' ? 'running' : it.status, it.status),
    ]),
    it.children.length ? children(view, bySeq, it.children) : null,
  ]);
}

function childLink(c: ChildRunView): HTMLElement {
  return h('span', { class: 'f-child' }, [
    h('a', { class: 'child-link mono', href: '#/runs/' + encodeURIComponent(c.runId), 'data-run-id': c.runId }, c.runId),
    ' ',
    badge(c.status),
  ]);
}
