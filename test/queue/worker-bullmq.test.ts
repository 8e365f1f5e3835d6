import { defineWorkerSuite } from './worker-suite';
import { bullmqBackend } from './queue-backends';

defineWorkerSuite(bullmqBackend);
