/** The page's stylesheet, served as /assets/app.css. Status colours are shared by badges, bars and the legend. */
export const APP_CSS = String.raw`
:root {
  --bg: #f5f7fa; --panel: #ffffff; --ink: #1d2433; --muted: #667085; --line: #e3e8ef; --line-strong: #cfd6e1;
  --accent: #3056d3;
  --executed: #3b6fe0; --restored: #9db0c9; --copied: #c3cfdf; --retried: #e8a317; --failed: #d9434e;
  --resume: #7b4ddb; --ok: #1f9d61; --warn: #c27c0e;
  --mono: ui-monospace, SFMono-Regular, Menlo, Consolas, "Liberation Mono", monospace;
  font-family: system-ui, -apple-system, "Segoe UI", Roboto, "Helvetica Neue", Arial, "Noto Sans", sans-serif;
  font-size: 14px; line-height: 1.45; color: var(--ink); background: var(--bg);
}
* { box-sizing: border-box; }
[hidden] { display: none !important; }
body { margin: 0; }
a { color: var(--accent); text-decoration: none; }
a:hover { text-decoration: underline; }
code, pre, .mono { font-family: var(--mono); font-size: 12.5px; }
h1 { font-size: 20px; margin: 0; font-weight: 650; display: flex; align-items: center; gap: 10px; flex-wrap: wrap; word-break: break-all; }
h1 .mono { font-size: inherit; }
h2 { font-size: 15px; margin: 0 0 12px; font-weight: 650; }
.muted { color: var(--muted); }
.topbar { display: flex; align-items: center; gap: 10px; padding: 10px 24px; background: #18202f; color: #e9eef6; }
.topbar .brand { color: #fff; font-weight: 700; font-size: 15px; letter-spacing: .2px; }
.brand-mark { color: #8fb0ff; }
.brand-sub { color: #98a4b8; }
.spacer { flex: 1; }
.live { display: inline-flex; align-items: center; gap: 6px; color: #b8f0d2; font-size: 12px; }
.live-dot { width: 8px; height: 8px; border-radius: 50%; background: #35d08a; animation: pulse 1.6s infinite; }
@keyframes pulse { 50% { opacity: .35; } }
main { max-width: 1280px; margin: 0 auto; padding: 20px 24px 48px; }
.card { background: var(--panel); border: 1px solid var(--line); border-radius: 10px; padding: 16px 18px; margin-top: 16px; }
.crumbs { margin-bottom: 10px; color: var(--muted); }
.toolbar { display: flex; flex-wrap: wrap; align-items: end; gap: 12px; margin-bottom: 14px; }
.toolbar label { display: flex; flex-direction: column; gap: 3px; font-size: 12px; color: var(--muted); }
input, select, button { font: inherit; }
input[type=text], input[type=number], input[type=password], select {
  border: 1px solid var(--line-strong); border-radius: 6px; padding: 5px 8px; background: #fff; color: var(--ink); min-width: 140px;
}
button { border: 1px solid var(--line-strong); background: #fff; border-radius: 6px; padding: 5px 12px; cursor: pointer; color: var(--ink); }
button:hover:not(:disabled) { border-color: var(--accent); }
button:disabled { opacity: .5; cursor: default; }
button.primary { background: var(--accent); border-color: var(--accent); color: #fff; }
button.danger { color: var(--failed); border-color: #efc2c6; }
table { width: 100%; border-collapse: collapse; }
th { text-align: left; font-weight: 600; color: var(--muted); font-size: 12px; text-transform: uppercase; letter-spacing: .4px; padding: 8px 10px; border-bottom: 1px solid var(--line); }
td { padding: 8px 10px; border-bottom: 1px solid var(--line); vertical-align: top; }
tr:last-child td { border-bottom: 0; }
table.runs tbody tr:hover { background: #f8faff; }
.num { text-align: right; font-variant-numeric: tabular-nums; }
.badge { display: inline-block; padding: 1px 9px; border-radius: 999px; font-size: 12px; font-weight: 600; line-height: 20px; white-space: nowrap; }
.st-running { background: #e3ecff; color: #2148b8; } .st-waiting { background: #f1e8ff; color: #6a3dc2; }
.st-paused { background: #fff3d6; color: #8a5a00; } .st-completed { background: #dcf5e8; color: #16794a; }
.st-failed { background: #fde2e4; color: #b3212e; } .st-cancelled { background: #eceff3; color: #4d5566; }
.progress { display: flex; align-items: center; gap: 8px; min-width: 150px; }
.progress-track { flex: 1; height: 6px; background: #e8edf4; border-radius: 3px; overflow: hidden; max-width: 120px; }
.progress-fill { height: 100%; background: var(--executed); }
.facts { display: grid; grid-template-columns: repeat(auto-fill, minmax(190px, 1fr)); gap: 10px 24px; margin: 14px 0 0; }
.facts div { min-width: 0; }
.facts dt { font-size: 11.5px; color: var(--muted); text-transform: uppercase; letter-spacing: .4px; }
.facts dd { margin: 2px 0 0; overflow-wrap: anywhere; }
.hint { margin: 12px 0 0; color: #3e4a5f; }
.notice { border-radius: 8px; padding: 9px 12px; margin-top: 12px; }
.notice.error { background: #fdecee; color: #8f1c26; border: 1px solid #f6c7cc; }
.notice.ok { background: #e6f6ee; color: #14663f; border: 1px solid #bfe6d1; }
.notice.warn { background: #fff5df; color: #7a5200; border: 1px solid #f1dca8; }
.error-text { color: var(--failed); }
.actions { display: flex; flex-wrap: wrap; gap: 8px; align-items: center; margin-top: 14px; }
.legend { display: flex; flex-wrap: wrap; gap: 14px; font-size: 12px; color: var(--muted); margin-bottom: 10px; }
.legend span { display: inline-flex; align-items: center; gap: 6px; }
.swatch { width: 14px; height: 10px; border-radius: 3px; display: inline-block; }
.sw-executed, .bar.executed { background: var(--executed); }
.sw-running, .bar.running { background: repeating-linear-gradient(135deg, var(--executed) 0 6px, #7fa2ee 6px 12px); background-size: 17px 17px; animation: flow 1.2s linear infinite; }
@keyframes flow { to { background-position: 17px 0; } }
.sw-restored, .bar.restored { background: var(--restored); }
.sw-copied, .bar.copied { background: repeating-linear-gradient(135deg, var(--copied) 0 4px, #dde5ef 4px 8px); }
.sw-retried, .bar.retried { background: var(--retried); }
.sw-failed, .bar.failed { background: repeating-linear-gradient(135deg, var(--failed) 0 5px, #e8707a 5px 10px); }
.sw-resume { width: 3px; height: 14px; background: var(--resume); border-radius: 1px; }
.gantt { position: relative; }
.g-row { display: grid; grid-template-columns: 210px 1fr; align-items: center; min-height: 26px; }
.g-label { padding-right: 12px; white-space: nowrap; overflow: hidden; text-overflow: ellipsis; font-size: 13px; }
.g-label .seq { color: var(--muted); font-size: 11.5px; display: inline-block; min-width: 34px; font-variant-numeric: tabular-nums; }
.g-agent { margin-top: 8px; border-top: 1px solid var(--line); }
.g-agent .g-label { font-weight: 650; font-size: 12.5px; color: #3e4a5f; padding-top: 6px; }
.g-track { position: relative; height: 26px; }
.g-axis { height: 22px; border-bottom: 1px solid var(--line-strong); }
.tick { position: absolute; bottom: 2px; font-size: 11px; color: var(--muted); transform: translateX(-50%); white-space: nowrap; }
.tick.first { transform: none; }
.bar { position: absolute; top: 6px; height: 14px; border-radius: 3px; min-width: 3px; cursor: pointer; }
.bar:hover, .bar.selected { outline: 2px solid #1d2433; outline-offset: 1px; }
.bar-note { position: absolute; top: 5px; font-size: 11px; color: var(--muted); white-space: nowrap; pointer-events: none; }
.g-pending { color: #a0a9b8; }
.attempt-mark { position: absolute; z-index: 2; text-shadow: 0 0 2px #fff, 0 0 2px #fff; top: 4px; width: 10px; height: 18px; margin-left: -5px; color: var(--failed); font-size: 13px; font-weight: 700; line-height: 18px; text-align: center; }
.g-overlay { position: absolute; top: 0; bottom: 0; right: 0; left: 210px; pointer-events: none; }
.gap-break { position: absolute; top: 26px; bottom: 0; background: repeating-linear-gradient(135deg, rgba(123,77,219,.10) 0 3px, rgba(123,77,219,.03) 3px 9px); border-left: 1px dotted rgba(123,77,219,.45); }
.tick.gap-label { color: var(--resume); font-weight: 600; }
.resume-line { position: absolute; top: 0; bottom: 0; width: 0; border-left: 2px dashed var(--resume); }
.resume-flag { position: absolute; top: 0; transform: translateX(4px); background: var(--resume); color: #fff; font-size: 11px; font-weight: 600; padding: 1px 7px; border-radius: 4px; white-space: nowrap; }
.resume-flag.left { transform: translateX(calc(-100% - 4px)); }
.steps-table td .tag { margin-right: 4px; }
.tag { display: inline-block; font-size: 11px; padding: 0 6px; border-radius: 4px; background: #eef1f6; color: #4d5566; line-height: 18px; }
.tag.executed { background: #e3ecff; color: #2148b8; } .tag.restored { background: #edf1f6; color: #4d5a70; }
.tag.copied { background: #f0f3f7; color: #5c6679; } .tag.retried { background: #fff1d1; color: #8a5a00; }
.tag.failed { background: #fde2e4; color: #b3212e; } .tag.committed { background: #dcf5e8; color: #16794a; }
.tag.started { background: #fff1d1; color: #8a5a00; } .tag.resume { background: #efe7fd; color: #5b34b5; }
.tag.skipped, .tag.pending { background: #f0f3f7; color: #7a8496; border: 1px dashed #cfd6e1; line-height: 16px; } .tag.running { background: #fff1d1; color: #8a5a00; }
.bar.skipped { background: #e3e8ef; border: 1px dashed #9aa5b8; }
.flow { display: flex; flex-direction: column; gap: 6px; }
.f-group { border: 1px solid var(--line); border-radius: 8px; padding: 6px 10px; background: #fbfcfe; }
.f-head { font-weight: 600; padding: 2px 0; display: flex; gap: 6px; align-items: center; flex-wrap: wrap; }
details.f-group > summary { cursor: pointer; list-style: revert; display: list-item; }
.f-scope { border-left: 3px solid var(--line-strong); margin: 6px 0 6px 4px; padding-left: 10px; }
.f-scope-head { font-size: 12px; color: var(--muted); display: flex; gap: 6px; align-items: center; flex-wrap: wrap; }
.f-children { display: flex; flex-direction: column; gap: 3px; margin: 3px 0; padding: 0; list-style: none; }
.f-step { cursor: pointer; padding: 2px 4px; border-radius: 4px; display: flex; gap: 6px; align-items: center; }
.f-step:hover, .f-step.selected { background: #eef3ff; }
.f-step[data-status="skipped"] { color: var(--muted); text-decoration: line-through; text-decoration-color: #b6bfcc; }
.f-step .seq { color: var(--muted); font-size: 11.5px; min-width: 34px; font-variant-numeric: tabular-nums; }
.f-lane .g-label { font-size: 12px; }
.f-items { max-height: 640px; overflow: auto; }
.f-more { margin: 6px 0; }
tr.selected td { background: #f3f6ff; }
.tt-controls { display: flex; flex-wrap: wrap; align-items: center; gap: 10px; }
.tt-controls input[type=range] { flex: 1; min-width: 220px; accent-color: var(--accent); }
.tt-caption { margin: 10px 0 6px; color: #3e4a5f; }
#tt-body[aria-busy="true"] { opacity: 0.45; }
.state-grid { display: grid; grid-template-columns: minmax(120px, 200px) 1fr; border: 1px solid var(--line); border-radius: 8px; overflow: hidden; }
.state-grid > div { padding: 6px 10px; border-bottom: 1px solid var(--line); min-width: 0; }
.state-grid > div:nth-last-child(-n+2) { border-bottom: 0; }
.state-key { font-family: var(--mono); font-size: 12.5px; background: #fafbfd; color: #3e4a5f; }
.state-key.changed { background: #fff7e0; }
.state-key .tag { margin-left: 6px; }
pre { margin: 0; white-space: pre-wrap; overflow-wrap: anywhere; max-height: 260px; overflow: auto; }
details { margin-top: 10px; }
summary { cursor: pointer; color: #3e4a5f; }
.system-rows { margin: 12px 0 0; padding-left: 18px; font-size: 12.5px; }
.empty { padding: 24px; text-align: center; color: var(--muted); }
.login { max-width: 420px; }
.login form { display: flex; flex-direction: column; gap: 8px; margin-top: 12px; }
.split { display: grid; grid-template-columns: 1fr 1fr; gap: 16px; }
h2.subhead { margin-top: 18px; font-size: 13.5px; color: #3e4a5f; }
h2 + h2.subhead { margin-top: 4px; }
.out-state { font-weight: 400; font-size: 12px; margin-left: 6px; }
.out-body { display: flex; flex-direction: column; gap: 6px; max-height: 420px; overflow: auto; }
.out-block { border-left: 3px solid var(--line-strong); padding: 2px 10px; }
.out-head { font-size: 12px; color: var(--muted); }
.out-text { white-space: pre-wrap; overflow-wrap: anywhere; }
.out-json { color: #3e4a5f; white-space: pre-wrap; overflow-wrap: anywhere; }
.out-block.withdrawn { border-left-color: #e7a3aa; }
.out-block.withdrawn .out-lines { text-decoration: line-through; text-decoration-color: #b3212e; opacity: .6; }
.out-note { font-size: 12px; color: #b3212e; }
.out-status { font-size: 12px; color: #3e4a5f; }
@media (max-width: 900px) { .split { grid-template-columns: 1fr; } .g-row { grid-template-columns: 140px 1fr; } .g-overlay { left: 140px; } }
`;
