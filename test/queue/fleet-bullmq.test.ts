import { defineFleetSuite } from './fleet-suite';
import { bullmqBackend } from './queue-backends';

defineFleetSuite(bullmqBackend);
