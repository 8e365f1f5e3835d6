import { defineRecoverySuite } from './recovery-suite';
import { pgBossBackend } from './queue-backends';

defineRecoverySuite(pgBossBackend);
