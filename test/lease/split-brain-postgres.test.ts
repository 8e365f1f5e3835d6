import { splitBrainSuite } from './split-brain-suite';

// Worker processes on PostgreSQL (run-row leases); each test in its own schema.
splitBrainSuite('postgres');
