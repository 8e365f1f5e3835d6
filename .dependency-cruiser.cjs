/**
 * The floors of Waypoint and the arrows that must never exist (issue 18). Run: `npm run lint:deps`.
 *
 *   src/contract     ground floor: store and queue contracts, record types, typed errors, DI tokens,
 *                    logger/clock/telemetry interfaces. Imports nothing else of ours.
 *   src/decorators   record metadata on top of the contract; import only the contract.
 *   src/storage      backends: implement the contract, never import the runtime or anything above.
 *   src/core         the runtime: works against the contract and the ports it owns (core/fleet-port.ts);
 *                    only the composition root (core/composition.ts) names concrete stores and the queue.
 *   src/queue, src/integrations, src/cli, src/ui, src/index.ts   above the runtime.
 *
 * TypeScript 7 has no compiler API dependency-cruiser can read, so sources are parsed with swc; it
 * reports type-only imports too, so a cycle of `import type` lines counts as a cycle.
 */
const COMPOSITION_ROOT = '^src/core/composition\\.ts$';
// One-line re-export shims left at the contract's old paths (src/storage/checkpoint-store.ts re-exports
// src/contract): not a backend, so the runtime may still import it until its import lines are rewritten.
const CONTRACT_SHIMS = '^src/storage/checkpoint-store\\.ts$';

/** @type {import('dependency-cruiser').IConfiguration} */
module.exports = {
  forbidden: [
    {
      name: 'no-circular',
      severity: 'error',
      comment: 'Import cycles make the floors run both ways; cut the cycle with a shared lower file or a port.',
      from: {},
      to: { circular: true },
    },
    {
      name: 'contract-imports-nothing-of-ours',
      severity: 'error',
      comment: 'The ground floor holds what everything shares and depends on nothing above it.',
      from: { path: '^src/contract/' },
      to: { path: '^src/', pathNot: '^src/contract/' },
    },
    {
      name: 'decorators-only-contract',
      severity: 'error',
      comment: 'Decorators record metadata on top of the contract; they never import the runtime or anything above.',
      from: { path: '^src/decorators/' },
      to: { path: '^src/', pathNot: ['^src/contract/', '^src/decorators/'] },
    },
    {
      name: 'storage-not-above',
      severity: 'error',
      comment: 'Backends implement the contract and import nothing from the runtime, the queue or the faces.',
      from: { path: '^src/storage/' },
      to: { path: ['^src/core/', '^src/queue/', '^src/cli/', '^src/ui/', '^src/index\\.ts$'] },
    },
    {
      name: 'storage-not-above-integrations',
      severity: 'error',
      comment: 'Backends import nothing from the integrations: the LangGraph saver creates its own tables (integrations/langgraph/sql-setup.ts).',
      from: { path: '^src/storage/' },
      to: { path: '^src/integrations/' },
    },
    {
      name: 'core-no-concrete-stores',
      severity: 'error',
      comment: 'The runtime works against the contract; only the composition root names a concrete store.',
      from: { path: '^src/core/', pathNot: COMPOSITION_ROOT },
      to: { path: '^src/storage/', pathNot: CONTRACT_SHIMS },
    },
    {
      name: 'core-not-queue',
      severity: 'error',
      comment: 'The queue plugs into the runtime through core/fleet-port.ts; only the composition root binds it.',
      from: { path: '^src/core/', pathNot: COMPOSITION_ROOT },
      to: { path: '^src/queue/' },
    },
    {
      name: 'core-not-faces',
      severity: 'error',
      comment: 'The runtime never imports the integrations, the CLI, the UI or the package entry.',
      from: { path: '^src/core/' },
      to: { path: ['^src/integrations/', '^src/cli/', '^src/ui/', '^src/index\\.ts$'] },
    },
  ],
  options: {
    parser: 'swc',
    tsPreCompilationDeps: true,
    doNotFollow: { path: 'node_modules' },
    enhancedResolveOptions: { extensions: ['.ts', '.d.ts', '.js', '.json'] },
  },
};
