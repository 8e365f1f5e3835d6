/** Page script, last part: hash routing. `#/` is the runs list, `#/runs/<id>?seq=<n>` a run. */

function route(): void {
  stopTimer();
  stopLiveOutput();
  setLive(false);
  lastBody = null;
  viewToken += 1;
  const hash = location.hash || '#/';
  const m = /^#\/runs\/([^?]+)(?:\?(.*))?$/.exec(hash);
  if (m) {
    const raw = m[1];
    let id: string;
    try {
      id = decodeURIComponent(raw);
    } catch {
      id = raw;
    }
    showRun(id, new URLSearchParams(m[2] || ''));
    return;
  }
  const q = hash.indexOf('?');
  showList(new URLSearchParams(q >= 0 ? hash.slice(q + 1) : ''));
}

window.addEventListener('hashchange', route);
route();
