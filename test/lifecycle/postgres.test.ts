import { postgresBackend } from './bench';
import { defineCrossProcessSuite } from './cross-process-suite';
import { defineShutdownSuite } from './shutdown-suite';

// Each test gets its own schema, named from the test's name and dropped afterwards.
defineShutdownSuite(postgresBackend);
defineCrossProcessSuite(postgresBackend);
