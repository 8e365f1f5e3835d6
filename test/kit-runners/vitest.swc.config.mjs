// A user's vitest setup for Waypoint: swc compiles the tests with decorator metadata (vitest's default
// esbuild transform records none). waypoint-durable resolves to this repository's build.
import { fileURLToPath } from 'node:url';
import swc from 'unplugin-swc';

const dist = fileURLToPath(new URL('../../dist/src/', import.meta.url));

export default {
  plugins: [swc.vite({ jsc: { parser: { syntax: 'typescript', decorators: true }, transform: { legacyDecorator: true, decoratorMetadata: true } } })],
  resolve: { alias: { 'waypoint-durable/testing': `${dist}testing/index.js`, 'waypoint-durable': `${dist}index.js` } },
  test: { root: fileURLToPath(new URL('.', import.meta.url)), include: ['*.vitest.ts'], pool: 'forks', maxWorkers: 1 },
};
