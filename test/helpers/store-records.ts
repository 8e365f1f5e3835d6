// The record builders moved to src/testing (shipped as waypoint-durable/testing with the conformance suite);
// the tests keep importing them from here.
export * from '../../src/testing/store-records';
