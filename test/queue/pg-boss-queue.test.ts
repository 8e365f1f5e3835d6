import { defineQueueContract } from './queue-contract';
import { pgBossBackend } from './queue-backends';

defineQueueContract(pgBossBackend);
