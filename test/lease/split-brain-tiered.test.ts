import { splitBrainSuite } from './split-brain-suite';

// Worker processes on the tiered store (PostgreSQL leases and fencing, Redis copy); each test in its own schema and key prefix.
splitBrainSuite('tiered');
