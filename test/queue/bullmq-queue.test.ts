import { defineQueueContract } from './queue-contract';
import { bullmqBackend } from './queue-backends';

defineQueueContract(bullmqBackend);
