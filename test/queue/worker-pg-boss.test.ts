import { defineWorkerSuite } from './worker-suite';
import { pgBossBackend } from './queue-backends';

defineWorkerSuite(pgBossBackend);
