/**
 * Page script, part 1: DOM helpers and formatting. Everything is built with createElement and
 * textContent, so run data is never parsed as HTML.
 */

/* exported app, liveEl, ms, fmtDuration, timeEl, badge, tag, notice, errorText, pretty, progressEl */

type AttrValue = string | number | boolean | null | undefined;
/** Attributes of {@link h}: `class`, `text`, `on<event>` listeners, anything else set as an attribute (`true` = present). */
type Attrs = Record<string, AttrValue | ((event: Event) => void)>;
type Child = Node | string | number | null | undefined | false;
type Children = Child | readonly Child[];

function required(id: string): HTMLElement {
  const el = document.getElementById(id);
  // plain Error: a page invariant (the server's HTML has every element), in the browser's console only.
  if (!el) throw new Error(`The page shell has no #${id} element.`);
  return el;
}

const app = required('app');
const liveEl = required('live');

function h<K extends keyof HTMLElementTagNameMap>(tagName: K, attrs?: Attrs | null, children?: Children): HTMLElementTagNameMap[K] {
  const el = document.createElement(tagName);
  if (attrs) {
    Object.keys(attrs).forEach((k) => {
      const v = attrs[k];
      if (v === null || v === undefined || v === false) return;
      if (typeof v === 'function') {
        if (k.slice(0, 2) === 'on') el.addEventListener(k.slice(2), v);
        return;
      }
      if (k === 'class') el.className = String(v);
      else if (k === 'text') el.textContent = String(v);
      else el.setAttribute(k, v === true ? '' : String(v));
    });
  }
  add(el, children);
  return el;
}

function add<E extends Element>(el: E, children: Children): E {
  if (children === null || children === undefined) return el;
  const list: readonly Child[] = Array.isArray(children) ? children : [children as Child];
  list.forEach((c) => {
    if (c === null || c === undefined || c === false) return;
    el.appendChild(typeof c === 'object' ? c : document.createTextNode(String(c)));
  });
  return el;
}

function ms(iso: string): number {
  return new Date(iso).getTime();
}

function fmtDuration(v: number | null | undefined): string {
  if (v === null || v === undefined || isNaN(v)) return '-';
  if (v < 1000) return Math.round(v) + ' ms';
  const s = v / 1000;
  if (s < 60) return (s < 10 ? s.toFixed(2) : s.toFixed(1)) + ' s';
  const m = Math.floor(s / 60);
  if (m < 60) return m + ' min ' + Math.round(s % 60) + ' s';
  const hr = Math.floor(m / 60);
  if (hr < 24) return hr + ' h ' + (m % 60) + ' min';
  return Math.floor(hr / 24) + ' d ' + (hr % 24) + ' h';
}

function fmtTime(iso: string): string {
  const d = new Date(iso);
  const time = d.toLocaleTimeString([], { hour: '2-digit', minute: '2-digit', second: '2-digit', hour12: false });
  if (d.toDateString() === new Date().toDateString()) return time;
  return d.toLocaleDateString([], { year: 'numeric', month: 'short', day: 'numeric' }) + ' ' + time;
}

function timeEl(iso: string): HTMLElement {
  return h('time', { datetime: iso, title: iso }, fmtTime(iso));
}

function badge(status: RunStatus): HTMLElement {
  return h('span', { class: 'badge st-' + status, 'data-status': status }, status);
}

/** A coloured label; `kind` is its CSS class (a step origin, an operation state, `failed`...). */
function tag(kind: string, text?: string, title?: string): HTMLElement {
  return h('span', { class: 'tag ' + kind, title: title || null }, text || kind);
}

function notice(kind: 'ok' | 'warn' | 'error', text: string): HTMLElement {
  return h('div', { class: 'notice ' + kind, role: kind === 'error' ? 'alert' : null }, text);
}

function errorText(e: ErrorView | null): string {
  return e ? (e.code ? e.code + ': ' : e.name && e.name !== 'Error' ? e.name + ': ' : '') + e.message : '';
}

function pretty(value: unknown): string {
  // JSON.stringify gives undefined for undefined; the <pre> then shows nothing, as before.
  return JSON.stringify(value, null, 2);
}

function progressEl(p: ProgressView): HTMLElement {
  const pct = p.total ? Math.round((100 * p.done) / p.total) : null;
  const fill = h('div', { class: 'progress-fill' });
  fill.style.width = (pct === null ? 100 : pct) + '%';
  if (pct === null) fill.style.opacity = '0.35';
  const steps = p.total === null ? p.done + ' recorded' : p.done + ' / ' + p.total;
  const label = p.items ? steps + ' \u00b7 items ' + p.items.done + ' / ' + p.items.total : steps;
  return h(
    'div',
    {
      class: 'progress',
      title:
        p.basis === 'plan'
          ? 'steps done / steps in the pipeline'
          : p.basis === 'flow'
            ? 'control-flow run: steps recorded / steps known so far (the loop iterations, the branch case and the forEach items recorded so far); the total grows as the run decides'
            : 'pipeline not registered with the UI: recorded steps',
    },
    [h('div', { class: 'progress-track' }, fill), h('span', { class: 'num' }, label)],
  );
}
