import { sqliteBackend } from './bench';
import { defineCrossProcessSuite } from './cross-process-suite';
import { defineShutdownSuite } from './shutdown-suite';

// Each test gets its own SQLite file in its own temp dir.
defineShutdownSuite(sqliteBackend);
defineCrossProcessSuite(sqliteBackend);
