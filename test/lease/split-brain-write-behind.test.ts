import { splitBrainSuite } from './split-brain-suite';

// Worker processes on the tiered store in write-behind mode (Redis leases and fencing, journal to
// PostgreSQL); each test in its own schema and key prefix.
splitBrainSuite('write-behind');
