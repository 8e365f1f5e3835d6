// Vitest runs only LangGraph's checkpointer conformance suite against the compiled saver
// (test/integrations/langgraph-validation-*.vitest.ts); everything else runs under node:test.
// npm test starts it from dist/test/integrations/langgraph-validation.test.js.
export default {
  test: {
    include: ['test/integrations/langgraph-validation-*.vitest.ts'],
    globals: true, // the suite calls describe/it/expect as globals
    pool: 'forks',
    maxWorkers: 2, // the machine running npm test may be small; three spec files still overlap
    testTimeout: 60_000,
    hookTimeout: 120_000,
  },
};
