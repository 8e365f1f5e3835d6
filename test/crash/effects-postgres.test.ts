import { POSTGRES_EFFECTS } from './effects-backends';
import { defineEffectsCrashSuite } from './effects-crash-suite';

defineEffectsCrashSuite(POSTGRES_EFFECTS, { runs: 3, seed: 12 });
