import 'reflect-metadata';
import { strict as assert } from 'node:assert';
import { describe, it } from 'node:test';
import { ContainerModule } from 'inversify';
import { MemoryCheckpointStore, StreamsUnsupportedError, TOKENS, Waypoint } from '../../src/index';
import { MinimalCheckpointStore } from '../storage/minimal-store';
import { newRun } from '../helpers/store-records';
import { defineRunStreamSuite } from './run-stream-suite';

/** waypoint.stream on the memory store: every Waypoint of the suite shares one store object (one process). */
defineRunStreamSuite(() => {
  const store = new MemoryCheckpointStore();
  return Promise.resolve({
    name: 'memory',
    modules: () => [new ContainerModule(({ bind }) => void bind(TOKENS.CheckpointStore).toConstantValue(store))],
    dispose: () => Promise.resolve(),
  });
}, false);

describe('waypoint.stream on a store without streams', () => {
  it('is STREAMS_UNSUPPORTED, naming the run and what the store lacks', async () => {
    const store = new MinimalCheckpointStore();
    const waypoint = await Waypoint.create({ modules: [new ContainerModule(({ bind }) => void bind(TOKENS.CheckpointStore).toConstantValue(store))] });
    try {
      await store.createRun(newRun('r1'));
      await assert.rejects(waypoint.stream('r1').next(), (error: unknown) => {
        assert.ok(error instanceof StreamsUnsupportedError);
        assert.equal(error.code, 'STREAMS_UNSUPPORTED');
        assert.match(error.message, /run 'r1'.*MinimalCheckpointStore.*appendEvents, readEvents, waitForEvents and streamLength/);
        return true;
      });
    } finally {
      await waypoint.close();
    }
  });
});
