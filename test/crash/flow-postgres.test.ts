import { POSTGRES_EFFECTS } from './effects-backends';
import { defineFlowCrashSuite } from './flow-crash-suite';

defineFlowCrashSuite(POSTGRES_EFFECTS, { trials: 3, seed: 20 });
