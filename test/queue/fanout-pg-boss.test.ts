import { defineFanOutSuite } from './fanout-suite';
import { pgBossBackend } from './queue-backends';

defineFanOutSuite(pgBossBackend);
