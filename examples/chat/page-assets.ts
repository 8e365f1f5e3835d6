import { resolve } from 'node:path';

/** The repository's root, from dist/examples/chat (compiled) or examples/chat (sources). */
const ROOT = resolve(__dirname, __dirname.includes('/dist/') ? '../../..' : '../..');

/**
 * The chat page's script: examples/chat/page/main.tsx (React and the AI SDK's `useChat`) bundled by
 * esbuild when the server starts (about a second), so the example has no build step of its own.
 */
export async function pageScript(): Promise<string> {
  const { build } = await import('esbuild');
  const result = await build({
    entryPoints: [resolve(ROOT, 'examples/chat/page/main.tsx')],
    tsconfig: resolve(ROOT, 'examples/chat/page/tsconfig.json'),
    bundle: true,
    write: false,
    format: 'esm',
    platform: 'browser',
    target: 'es2022',
    jsx: 'automatic',
    minify: true,
    define: { 'process.env.NODE_ENV': '"production"' },
    logLevel: 'error',
  });
  return result.outputFiles[0].text;
}

const STYLE = `
  body { font: 15px/1.45 system-ui, sans-serif; margin: 0; background: #f6f7f9; color: #1d2330; }
  main { max-width: 720px; margin: 0 auto; padding: 24px 16px 120px; }
  h1 { font-size: 18px; margin: 0 0 4px; } .sub { color: #5b6475; margin: 0 0 20px; font-size: 13px; }
  .msg { padding: 10px 14px; border-radius: 10px; margin: 10px 0; white-space: pre-wrap; }
  .user { background: #dfe8ff; margin-left: 80px; } .assistant { background: #fff; border: 1px solid #e1e4ea; margin-right: 40px; }
  .tool { font: 12px ui-monospace, monospace; color: #5b6475; margin: 4px 0; }
  .status { font-size: 13px; color: #8a5a00; background: #fff6e0; border-radius: 6px; padding: 4px 8px; margin-top: 6px; display: inline-block; }
  form { position: fixed; bottom: 0; left: 0; right: 0; background: #fff; border-top: 1px solid #e1e4ea; padding: 12px; display: flex; gap: 8px; justify-content: center; }
  input { width: min(560px, 70vw); padding: 9px 12px; border: 1px solid #c9ced8; border-radius: 8px; font: inherit; }
  button { padding: 9px 16px; border-radius: 8px; border: 0; background: #2b5cd6; color: #fff; font: inherit; cursor: pointer; }
  button.stop { background: #b3261e; } .err { color: #b3261e; }
`;

/** The chat page: a shell for the script. */
export function chatPage(): string {
  return `<!doctype html><html lang="en"><head><meta charset="utf-8"><title>Waypoint chat</title>
<meta name="viewport" content="width=device-width, initial-scale=1"><style>${STYLE}</style></head>
<body><main id="app"><p>Loading…</p></main><script type="module" src="/chat.js"></script></body></html>`;
}

/** Where an approval link lands: the token stays in the fragment (never sent in a GET) until the manager presses Approve. */
export function approvePage(): string {
  return `<!doctype html><html lang="en"><head><meta charset="utf-8"><title>Approve a refund</title><style>${STYLE}</style></head>
<body><main><h1>Refund approval</h1><p class="sub">The support assistant asks to refund 40 EUR for order A-1042.</p>
<button id="approve">Approve the refund</button><p id="result" role="status"></p></main>
<script>
document.getElementById('approve').addEventListener('click', async () => {
  const token = location.hash.slice(1);
  const out = document.getElementById('result');
  const res = await fetch('/api/waypoint/approve/' + encodeURIComponent(token), { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}' });
  const body = await res.json().catch(() => ({}));
  out.textContent = res.ok ? 'Approved: the assistant goes on.' : 'Not delivered (' + res.status + ' ' + ((body.error && body.error.code) || '') + '): ' + ((body.error && body.error.message) || '');
  out.className = res.ok ? '' : 'err';
});
</script></body></html>`;
}
