/**
 * The floors of Waypoint and the arrows that must never exist (issue 18). Run: `npm run lint:deps`.
 *
 *   src/contract     ground floor: store and queue contracts, record types, typed errors, DI tokens,
 *                    logger/clock/telemetry interfaces. Imports nothing else of ours.
 *   src/decorators   record metadata on top of the contract; import only the contract.
 *   src/storage      backends: implement the contract, never import the runtime or anything above.
 *   src/core         the runtime: works against the contract and the ports it owns (core/run/fleet-port.ts);
 *                    imports no store and not the queue. Its rooms: ports (default clock, logger, telemetry),
 *                    state (values, state frame and schema), plan (decorators to plans), step (one step's
 *                    attempts and recording), flow (the interpreter every pipeline runs on), history (stored
 *                    rows: integrity, restore, read model, base rows, retention, fork), lease, run (the
 *                    driver, a run's vocabulary and options). The low rooms' arrows are fixed below.
 *   src/queue, src/integrations   above the runtime; they plug into it, never into the composition.
 *   src/composition  the composition root: `Waypoint` and `Waypoint.create`, the one place naming
 *                    concrete stores and the queue (composition/defaults.ts).
 *   src/cli, src/ui, src/http, src/entry, src/index.ts   the faces and the package's entry points, on top.
 *   bench            outside the package, a user of it: imports only its public entry points (issue 36).
 *
 * TypeScript 7 has no compiler API dependency-cruiser can read, so sources are parsed with swc; it
 * reports type-only imports too, so a cycle of `import type` lines counts as a cycle.
 */
const { exports: packageExports } = require('./package.json');

/** The package's public entry files, from package.json "exports" (./dist/src/x.js is built from src/x.ts), as path patterns. */
const PUBLIC_ENTRIES = Object.values(packageExports)
  .map((target) => (typeof target === 'object' ? target.default : null))
  .filter((file) => typeof file === 'string' && file.startsWith('./dist/src/'))
  .map((file) => `^${file.slice('./dist/'.length).replace(/\.js$/, '.ts').replace(/\./g, '\\.')}$`);

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
      name: 'storage-only-contract',
      severity: 'error',
      comment:
        'Backends implement the contract and import nothing else of ours: not the runtime, the decorators, the queue, the integrations (the LangGraph saver creates its own tables) or the faces.',
      from: { path: '^src/storage/' },
      to: { path: '^src/', pathNot: ['^src/contract/', '^src/storage/'] },
    },
    {
      name: 'core-no-storage',
      severity: 'error',
      comment: 'The runtime works against src/contract; only the composition root (src/composition) names a store.',
      from: { path: '^src/core/' },
      to: { path: '^src/storage/' },
    },
    {
      name: 'core-files-in-rooms',
      severity: 'error',
      comment: 'The runtime is split into rooms (src/core/<room>/, each with a README.md line saying what it holds); a file belongs to one.',
      from: { path: '^src/core/[^/]+\\.ts$' },
      to: {},
    },
    {
      name: 'core-ports-ground',
      severity: 'error',
      comment: 'core/ports holds the default clock, logger and telemetry: the contract is all they need.',
      from: { path: '^src/core/ports/' },
      to: { path: '^src/core/', pathNot: '^src/core/ports/' },
    },
    {
      name: 'core-state-below-plan',
      severity: 'error',
      comment: 'core/state (values, serialization, the state frame and schema) knows nothing of plans, steps or runs.',
      from: { path: '^src/core/state/' },
      to: { path: '^src/core/', pathNot: ['^src/core/state/', '^src/core/ports/'] },
    },
    {
      name: 'core-plan-on-state',
      severity: 'error',
      comment: 'core/plan reads decorator metadata into plans; it builds on core/state and nothing that runs.',
      from: { path: '^src/core/plan/' },
      to: { path: '^src/core/', pathNot: ['^src/core/plan/', '^src/core/state/', '^src/core/ports/'] },
    },
    {
      name: 'core-stream-writer',
      severity: 'error',
      comment: "core/stream writes a run's live output: it needs values (core/state) and nothing that runs steps or runs.",
      from: { path: '^src/core/stream/' },
      to: { path: '^src/core/', pathNot: ['^src/core/stream/', '^src/core/state/', '^src/core/ports/'] },
    },
    {
      name: 'core-lease-alone',
      severity: 'error',
      comment: 'core/lease (leases, the process registry, the shutdown harness) needs only the options and the pause request of a run.',
      from: { path: '^src/core/lease/' },
      to: { path: '^src/core/', pathNot: ['^src/core/lease/', '^src/core/ports/', '^src/core/run/(options|execution)\\.ts$'] },
    },
    {
      name: 'core-driver-on-top',
      severity: 'error',
      comment: 'The run driver and its restorer are the top of the runtime: only the composition root uses them, nothing inside core.',
      from: { path: '^src/core/', pathNot: '^src/core/run/' },
      to: { path: '^src/core/run/(run-driver|run-restore)\\.ts$' },
    },
    {
      name: 'core-not-queue',
      severity: 'error',
      comment: 'The queue plugs into the runtime through core/run/fleet-port.ts; only the composition root binds it.',
      from: { path: '^src/core/' },
      to: { path: '^src/queue/' },
    },
    {
      name: 'core-not-above',
      severity: 'error',
      comment: 'The runtime never imports the integrations, the composition root, the CLI, the UI or the entry points.',
      from: { path: '^src/core/' },
      to: { path: ['^src/integrations/', '^src/composition/', '^src/cli/', '^src/ui/', '^src/http/', '^src/entry/', '^src/index\\.ts$'] },
    },
    {
      name: 'queue-below-faces',
      severity: 'error',
      comment: 'The queue plugs into the runtime (core/run/fleet-port.ts); it never imports the integrations, the CLI, the UI or the entry points.',
      from: { path: '^src/queue/' },
      to: { path: ['^src/integrations/', '^src/cli/', '^src/ui/', '^src/http/', '^src/entry/', '^src/index\\.ts$'] },
    },
    {
      name: 'integrations-below-faces',
      severity: 'error',
      comment: 'The integrations build on the runtime and the stores; they never import the queue, the CLI, the UI or the entry points.',
      from: { path: '^src/integrations/' },
      to: { path: ['^src/queue/', '^src/cli/', '^src/ui/', '^src/http/', '^src/entry/', '^src/index\\.ts$'] },
    },
    {
      name: 'composition-on-top',
      severity: 'error',
      comment:
        'Only the faces and entry points (cli, ui, http, entry, index.ts, and the test kit in src/testing/kit, which runs pipelines through Waypoints as a user does) use the composition root; the queue, the integrations and the store conformance suites plug in below it.',
      from: {
        path: ['^src/contract/', '^src/decorators/', '^src/storage/', '^src/core/', '^src/queue/', '^src/integrations/', '^src/testing/'],
        pathNot: '^src/testing/kit/',
      },
      to: { path: '^src/composition/' },
    },
    {
      name: 'bench-only-public-entries',
      severity: 'error',
      comment:
        'The bench measures the package as a user gets it: it imports only the entry points package.json "exports" maps (src/index.ts, src/entry/*, src/testing/index.ts, the integrations\' index files), never a file behind them. What it needs and no entry exports, it reaches through the public API or keeps in bench/.',
      from: { path: '^bench/' },
      to: { path: '^src/', pathNot: PUBLIC_ENTRIES },
    },
  ],
  options: {
    parser: 'swc',
    tsPreCompilationDeps: true,
    doNotFollow: { path: 'node_modules' },
    enhancedResolveOptions: { extensions: ['.ts', '.d.ts', '.js', '.json'] },
  },
};
