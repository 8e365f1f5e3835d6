import { splitBrainSuite } from './split-brain-suite';

// Worker processes on Redis (Lua leases on the server clock); each test in its own key prefix.
splitBrainSuite('redis');
