import { defineRecoverySuite } from './recovery-suite';
import { bullmqBackend } from './queue-backends';

defineRecoverySuite(bullmqBackend);
