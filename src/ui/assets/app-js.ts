import { CORE_JS } from './core-js';
import { RUN_JS } from './run-js';
import { TIMELINE_JS } from './timeline-js';

/**
 * The whole page script, served as /assets/app.js: one strict-mode IIFE (nothing leaks into the page's
 * globals), started once the document is parsed (the tag is `defer`), then driven by the URL hash.
 */
export const APP_JS = `(function () {
'use strict';
${CORE_JS}
${RUN_JS}
${TIMELINE_JS}
window.addEventListener('hashchange', route);
route();
})();
`;
