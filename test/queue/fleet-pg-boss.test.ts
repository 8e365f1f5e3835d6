import { defineFleetSuite } from './fleet-suite';
import { pgBossBackend } from './queue-backends';

defineFleetSuite(pgBossBackend);
