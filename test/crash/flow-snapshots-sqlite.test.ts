import { SQLITE_EFFECTS } from './effects-backends';
import { defineFlowCrashSuite } from './flow-crash-suite';

// Issue 40: the workers take a resume snapshot every 3 rows, so every resume after a kill starts from one
// (read by the children this test spawns, which inherit this variable).
process.env.WAYPOINT_RESUME_BASE_EVERY = '3';
defineFlowCrashSuite(SQLITE_EFFECTS, { trials: 2, seed: 20, maxKills: 3, label: ' (resume snapshots every 3 rows)' });
