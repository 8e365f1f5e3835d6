import { defineStaleWakeSuite } from './fanout-stale-wake-suite';
import { pgBossBackend } from './queue-backends';

defineStaleWakeSuite(pgBossBackend, 100);
