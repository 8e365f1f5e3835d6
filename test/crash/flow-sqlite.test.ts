import { SQLITE_EFFECTS } from './effects-backends';
import { defineFlowCrashSuite } from './flow-crash-suite';

defineFlowCrashSuite(SQLITE_EFFECTS, { trials: 2, seed: 20, maxKills: 3 });
