import 'reflect-metadata';
import { strict as assert } from 'node:assert';
import { describe, it } from 'node:test';
import { listShownRuns } from '../../src/core/flow/fan-out';
import { serialize } from '../../src/core/state/serializer';
import { MemoryCheckpointStore } from '../../src/storage/memory-store';
import { ReadApi } from '../../src/ui/read-api';

/**
 * Items of distributed forEach bodies are child runs marked hidden in their metadata: listings leave them
 * out (the API's list, `runs list`, the timeline page's list) and still fill a page, while a parent's
 * children and a named item pipeline list them.
 */

async function storeWith(order: ('run' | 'item')[]): Promise<MemoryCheckpointStore> {
  const store = new MemoryCheckpointStore();
  await store.init();
  await store.createRun({ runId: 'parent', pipelineName: 'p', pipelineVersion: '1', input: serialize({}), metadata: serialize({}) });
  let n = 0;
  for (const kind of order) {
    n += 1;
    // Created one after another: listings are newest first, so the last created comes first.
    await new Promise((resolve) => setTimeout(resolve, 2));
    if (kind === 'run') {
      await store.createRun({ runId: `run-${n}`, pipelineName: 'p', pipelineVersion: '1', input: serialize({}), metadata: serialize({}) });
    } else {
      const fanOut = JSON.stringify({ at: 'forEach(files)', items: 100, concurrency: 4, onItemError: 'fail', hidden: true });
      await store.createRun({
        runId: `parent/files/${n}`,
        parentRunId: 'parent',
        pipelineName: 'p:items:files',
        pipelineVersion: '1',
        input: serialize({}),
        metadata: serialize({ parentRunId: 'parent', itemIndex: String(n), fanOut }),
      });
    }
  }
  return store;
}

describe('listings without the items of distributed forEach bodies', () => {
  it('leaves items out and keeps a limited page full by reading on past them', async () => {
    // Newest first: 12 items, then 3 runs, then the parent (oldest).
    const store = await storeWith(['run', 'run', 'run', ...Array<'item'>(12).fill('item')]);
    const page = await listShownRuns(store, { limit: 3 });
    assert.deepEqual(
      page.map((r) => r.runId),
      ['run-3', 'run-2', 'run-1'],
    );
    const all = await listShownRuns(store, {});
    assert.deepEqual(all.map((r) => r.runId).sort(), ['parent', 'run-1', 'run-2', 'run-3']);
    // A short last page: fewer runs than the limit, no endless reading.
    assert.equal((await listShownRuns(store, { limit: 10 })).length, 4);
  });

  it('lists items when the filter asks for a parent’s children or names their pipeline', async () => {
    const store = await storeWith(['item', 'run', 'item']);
    assert.equal((await listShownRuns(store, { parentRunId: 'parent' })).length, 2);
    assert.equal((await listShownRuns(store, { pipelineName: 'p:items:files' })).length, 2);
  });

  it('the read API behind the timeline page lists no items', async () => {
    const store = await storeWith(['item', 'item', 'run', 'item']);
    const api = new ReadApi(store, { plans: new Map(), integrity: {}, actionsAllowed: false });
    const { runs } = await api.listRuns(new URLSearchParams('limit=2'));
    assert.deepEqual(
      runs.map((r) => r.runId),
      ['run-3', 'parent'],
    );
  });
});
