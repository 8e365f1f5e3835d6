/**
 * LangGraph's checkpointer conformance suite, in full (no filter, nothing skipped), against the compiled
 * WaypointCheckpointSaver on sqlite. Run by vitest (see vitest.config.mjs), spawned from
 * langgraph-validation.test.ts, which passes the compiled initializer's path in WAYPOINT_LG_INITIALIZER.
 */
import { createRequire } from 'node:module';
import { deltaChannelHistoryTests, validate } from '@langchain/langgraph-checkpoint-validation';
import type { SaverTestInitializer, ValidationBackend } from './langgraph-validation-initializer';

const modulePath = process.env.WAYPOINT_LG_INITIALIZER;
if (!modulePath) throw new Error('WAYPOINT_LG_INITIALIZER is not set: run this suite through npm test (test/integrations/langgraph-validation.test.ts).');
const { initializers } = createRequire(modulePath)(modulePath) as { initializers: Record<ValidationBackend, SaverTestInitializer> };

validate(initializers.sqlite);
// Opt-in part of the same package: the ancestor walk that rebuilds delta channels from stored writes.
deltaChannelHistoryTests(initializers.sqlite);
