import { SQLITE_EFFECTS } from './effects-backends';
import { defineEffectsCrashSuite } from './effects-crash-suite';

defineEffectsCrashSuite(SQLITE_EFFECTS, { runs: 3, seed: 11 });
