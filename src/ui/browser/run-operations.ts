/**
 * Page script: the run page's operations card (side effects and failed attempts from the operations log)
 * and its resume points (a row in the steps table, a flag on the timeline).
 */

/* exported operationsCard, resumeRow, resumeText */

function resumeText(p: ResumePointView): string {
  const why =
    p.reason === 'fork'
      ? 'a fork of this run was resumed'
      : p.reason === 'attempts'
        ? "the step's attempt count restarted"
        : "one of the largest gaps between steps, within the run's lease count";
  return (
    (p.reason === 'fork' ? 'Forked run resumed' : 'Resumed') +
    ': session ' +
    p.session +
    ' started at ' +
    p.stepKey +
    ' after a gap of ' +
    fmtDuration(p.gapMs) +
    '; steps up to #' +
    p.afterSequence +
    ' restored from checkpoints (' +
    why +
    ').'
  );
}

function resumeRow(p: ResumePointView): HTMLElement {
  return h('tr', { class: 'resume-row' }, h('td', { colspan: 7 }, [tag('resume', 'resume point'), ' ', resumeText(p)]));
}

function operationsCard(d: RunDetailView): HTMLElement {
  if (!d.sideEffects.length && !d.attempts.length && !d.signals.length) return h('span');
  const parts: HTMLElement[] = [h('h2', null, 'Operations log')];
  if (d.sideEffects.length) {
    parts.push(h('h2', { class: 'subhead' }, 'Side effects'));
    parts.push(sideEffectsTable(d));
  }
  if (d.attempts.length) {
    parts.push(h('h2', { class: 'subhead' }, 'Failed attempts'));
    parts.push(attemptsTable(d));
  }
  if (d.signals.length) {
    parts.push(h('h2', { class: 'subhead' }, 'Signals delivered'));
    parts.push(
      h(
        'ul',
        null,
        d.signals.map((s) => h('li', null, [h('span', { class: 'mono' }, s.name), ' at ', timeEl(s.at)])),
      ),
    );
  }
  return h('section', { class: 'card', id: 'operations' }, parts);
}

/** The operations log's side effects, one row each: step, operation, state, tries, times, error. */
function sideEffectsTable(d: RunDetailView): HTMLElement {
  return h('table', { id: 'side-effects' }, [
    h(
      'thead',
      null,
      h(
        'tr',
        null,
        ['Step', 'Operation', 'State', 'Tries', 'First started', 'Last change', 'Error'].map((t) => h('th', null, t)),
      ),
    ),
    h(
      'tbody',
      null,
      d.sideEffects.map((e) =>
        h('tr', null, [
          h('td', null, e.stepKey),
          h('td', { class: 'mono' }, e.name),
          h('td', null, tag(e.state)),
          h('td', { class: 'num' }, e.attempts),
          h('td', null, timeEl(e.createdAt)),
          h('td', null, timeEl(e.updatedAt)),
          h('td', { class: 'error-text' }, errorText(e.error)),
        ]),
      ),
    ),
  ]);
}

/** The failed attempts the operations log records, with the session each ran in. */
function attemptsTable(d: RunDetailView): HTMLElement {
  return h('table', { id: 'attempts' }, [
    h(
      'thead',
      null,
      h(
        'tr',
        null,
        ['Step', 'Attempt', 'Session', 'Failed at', 'Error'].map((t) => h('th', null, t)),
      ),
    ),
    h(
      'tbody',
      null,
      d.attempts.map((a) =>
        h('tr', null, [
          h('td', null, a.stepKey),
          h('td', { class: 'num' }, a.attempt),
          h('td', { class: 'num' }, a.session),
          h('td', null, timeEl(a.at)),
          h('td', { class: 'error-text' }, errorText(a.error)),
        ]),
      ),
    ),
  ]);
}
