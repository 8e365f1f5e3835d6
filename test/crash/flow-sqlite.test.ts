import { SQLITE_EFFECTS } from './effects-backends';
import { defineFlowCrashSuite } from './flow-crash-suite';

defineFlowCrashSuite(SQLITE_EFFECTS, { trials: 3, seed: 20 });
