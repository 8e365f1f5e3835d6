import { POSTGRES_EFFECTS, SQLITE_EFFECTS } from './effects-backends';
import { defineFlowCrashSuite } from './flow-crash-suite';

// The control-flow pipeline's workers with durability 'async' (test/crash/flow-worker.ts reads it).
process.env.WAYPOINT_CRASH_DURABILITY = 'async';
defineFlowCrashSuite(SQLITE_EFFECTS, { trials: 2, seed: 50, maxKills: 3, label: ', durability async' });
defineFlowCrashSuite(POSTGRES_EFFECTS, { trials: 2, seed: 52, maxKills: 3, label: ', durability async' });
