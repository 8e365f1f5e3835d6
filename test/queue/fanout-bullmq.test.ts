import { defineFanOutSuite } from './fanout-suite';
import { bullmqBackend } from './queue-backends';

defineFanOutSuite(bullmqBackend);
