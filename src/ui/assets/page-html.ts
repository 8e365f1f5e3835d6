/**
 * The page shell: everything else is drawn by /assets/app.js from the JSON API. Asset and API URLs are
 * relative, so the UI also works behind a reverse proxy under a path prefix.
 */
export const PAGE_HTML = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="referrer" content="no-referrer">
<title>Waypoint runs</title>
<link rel="icon" href="data:,">
<link rel="stylesheet" href="assets/app.css">
<script src="assets/app.js" defer></script>
</head>
<body>
<header class="topbar">
  <a class="brand" href="#/"><span class="brand-mark" aria-hidden="true">&#9670;</span> Waypoint</a>
  <span class="brand-sub">run timeline</span>
  <span class="spacer"></span>
  <span id="live" class="live" hidden><span class="live-dot" aria-hidden="true"></span>live</span>
</header>
<main id="app" aria-live="polite"><p class="muted">Loading&hellip;</p></main>
<noscript><p class="notice">This page needs JavaScript; the same data is in the JSON API at <code>api/runs</code>.</p></noscript>
</body>
</html>
`;

/** The sign-in page shown when a token is required and the browser has no session yet. */
export function loginPage(wrongToken: boolean): string {
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="referrer" content="no-referrer">
<title>Waypoint UI: sign in</title>
<link rel="icon" href="data:,">
<link rel="stylesheet" href="assets/app.css">
</head>
<body>
<header class="topbar"><span class="brand"><span class="brand-mark" aria-hidden="true">&#9670;</span> Waypoint</span></header>
<main class="login">
  <h1>Sign in</h1>
  <p>This Waypoint UI requires the token it was started with (<code>--token</code> or <code>WAYPOINT_UI_TOKEN</code>).</p>
  ${wrongToken ? '<p class="error-text" role="alert">That token is not the right one.</p>' : ''}
  <form method="post" action="login">
    <label for="token">Token</label>
    <input id="token" name="token" type="password" autocomplete="current-password" required minlength="16" autofocus>
    <button type="submit" class="primary">Sign in</button>
  </form>
</main>
</body>
</html>
`;
}
