import { POSTGRES_EFFECTS, SQLITE_EFFECTS } from './effects-backends';
import { defineEffectsCrashSuite } from './effects-crash-suite';

// The workers run with durability 'async' (test/crash/effects-worker.ts reads it): a step's row is written
// while the next step runs, and the same guarantees are checked. `npm run crash-test -- --durability async`
// runs the long series.
process.env.WAYPOINT_CRASH_DURABILITY = 'async';
defineEffectsCrashSuite(SQLITE_EFFECTS, { runs: 8, seed: 41, label: ', durability async', timeoutMs: 600_000 });
defineEffectsCrashSuite(POSTGRES_EFFECTS, { runs: 8, seed: 43, label: ', durability async', timeoutMs: 600_000 });
