/** Page script: the time-travel panel (a slider over checkpoints, the state at each, forks from it). */

/* exported timeTravelCard */

interface TimeTravelCard {
  el: HTMLElement;
  select(seq: number): void;
}

function timeTravelCard(view: RunView, d: RunDetailView): TimeTravelCard {
  const lo = d.checkpoints.oldest;
  const hi = d.checkpoints.latest;
  const seq = Math.min(hi, Math.max(lo, view.seq === null ? hi : view.seq));
  const slider = h('input', { type: 'range', id: 'tt-slider', min: lo, max: hi, step: 1, value: seq, 'aria-label': 'Checkpoint sequence' });
  const label = h('strong', { id: 'tt-seq', class: 'num' });
  const body = h('div', { id: 'tt-body' });
  const caption = h('p', { class: 'tt-caption' });
  const forkId = d.actions.allowed ? h('input', { type: 'text', id: 'fork-id', 'aria-label': 'New run id' }) : null;
  const forkBox = forkId && h('div', { class: 'actions' }, [forkId, forkButton(view, d, forkId, slider)]);
  let pending = 0;
  function select(wanted: number): void {
    const n = Math.min(hi, Math.max(lo, wanted));
    view.seq = n;
    slider.value = String(n);
    label.textContent = n + ' / ' + hi;
    if (forkId) forkId.value = d.run.runId + '-fork-' + n;
    caption.textContent = checkpointCaption(d, n);
    document.querySelectorAll('[data-seq]').forEach((el) => {
      el.classList.toggle('selected', Number(el.getAttribute('data-seq')) === n);
    });
    // Until the checkpoint arrives the body still shows the previous one: mark it busy so it is not read
    // as the state after step n (the caption already names n).
    body.setAttribute('aria-busy', 'true');
    const mine = ++pending;
    Promise.all([checkpoint(view, d, n), n > lo ? checkpoint(view, d, n - 1) : Promise.resolve(null)])
      .then(([cur, prev]) => {
        if (mine !== pending) return;
        body.replaceChildren(checkpointBody(d, cur, prev, n));
        body.removeAttribute('aria-busy');
      })
      .catch((err: unknown) => {
        if (mine !== pending) return;
        body.replaceChildren(notice('error', messageOf(err)));
        body.removeAttribute('aria-busy');
      });
  }
  slider.addEventListener('input', () => select(Number(slider.value)));
  const el = h('section', { class: 'card', id: 'time-travel' }, [
    h('h2', null, 'Time travel'),
    h('div', { class: 'tt-controls' }, [
      h('button', { type: 'button', 'aria-label': 'Previous checkpoint', onclick: () => select(Number(slider.value) - 1) }, '\u25C0'),
      slider,
      h('button', { type: 'button', 'aria-label': 'Next checkpoint', onclick: () => select(Number(slider.value) + 1) }, '\u25B6'),
      h('span', null, ['Checkpoint ', label]),
    ]),
    caption,
    forkBox,
    body,
  ]);
  select(seq);
  return { el, select };
}

/** The fork button: forks the run from the slider's checkpoint as the id typed in `forkId` ('' lets the server name it), then opens the fork. */
function forkButton(view: RunView, d: RunDetailView, forkId: HTMLInputElement, slider: HTMLInputElement): HTMLElement {
  const fork = () =>
    post<RunInfoView>(runPath(d.run.runId) + '/fork', { newRunId: forkId.value.trim(), fromSequence: Number(slider.value) })
      .then((r) => {
        location.hash = '#/runs/' + encodeURIComponent(r.body.run.runId);
      })
      .catch((err: unknown) => {
        view.reload({ kind: 'error', text: 'Fork failed: ' + messageOf(err) });
      });
  return h('button', { type: 'button', id: 'action-fork', onclick: () => void fork() }, 'Fork from this checkpoint');
}

/** What checkpoint `n` is: the run input, the state after a step, or after a row the runtime wrote. */
function checkpointCaption(d: RunDetailView, n: number): string {
  const row = d.steps.filter((s) => s.sequence === n)[0];
  const sys = d.systemRows.filter((r) => r.sequence === n)[0];
  return n === 0
    ? 'Before any step: the run input.'
    : row
      ? 'After step #' + n + ', ' + row.path + ' (' + row.origin + ').'
      : sys
        ? systemRowText(sys)
        : 'After sequence ' + n + '.';
}

function checkpoint(view: RunView, d: RunDetailView, n: number): Promise<CheckpointView> {
  // Checkpoints before the latest never change; the latest may, while the run moves.
  const key = n + '@' + d.checkpoints.latest;
  let cached = view.cache[key];
  if (!cached) {
    cached = request<CheckpointView>(runPath(d.run.runId) + '/checkpoints/' + n).then((r) => r.body);
    view.cache[key] = cached;
    cached.catch(() => {
      delete view.cache[key];
    });
  }
  return cached;
}

function checkpointBody(d: RunDetailView, cur: CheckpointView, prev: CheckpointView | null, n: number): HTMLElement {
  const cp = cur.checkpoint;
  const state = cp.shared_context || {};
  const before = prev ? prev.checkpoint.shared_context || {} : null;
  const grid = h('div', { class: 'state-grid', id: 'tt-state', 'data-checkpoint': n });
  Object.keys(state)
    .sort()
    .forEach((k) => {
      const changed = before !== null && JSON.stringify(before[k]) !== JSON.stringify(state[k]);
      grid.appendChild(h('div', { class: 'state-key' + (changed ? ' changed' : '') }, [k, changed ? tag('retried', 'changed') : null]));
      grid.appendChild(h('div', null, h('pre', null, pretty(state[k]))));
    });
  // A failed run is terminal until resumed, but its cursor still names the step a resume retries.
  const ended = cp.is_terminal && d.run.status !== 'failed';
  const next = ended ? 'none (run ' + d.run.status + ')' : keyAt(d, cp.current_agent_index, cp.current_step_index);
  return h('div', { 'data-checkpoint': n }, [
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
