import { defineStaleWakeSuite } from './fanout-stale-wake-suite';
import { bullmqBackend } from './queue-backends';

defineStaleWakeSuite(bullmqBackend, 100);
