import { strict as assert } from 'node:assert';
import { describe, it } from 'node:test';
import type { CheckpointStore, StoredStreamEvent } from '../../src/contract/checkpoint-store';
import { MemoryCheckpointStore } from '../../src/storage/memory-store';
import { streamCases } from '../../src/testing/conformance-stream';
import type { StoreFixture } from '../../src/testing/fixture';

/**
 * The stream section of the conformance suite (src/testing/conformance-stream.ts) catches a broken store:
 * its cases run here against the memory store with one stream rule broken at a time, and some must fail
 * (and, as a control, all pass on the store unbroken). A suite that passed a store dropping its fence or
 * delivering an event twice would hold a user's own store to nothing.
 */
type Breakage = Partial<Record<'appendEvents' | 'readEvents' | 'waitForEvents', (inner: MemoryCheckpointStore) => (...args: never[]) => unknown>>;

/** The memory store with the methods `breakage` names replaced (the rest as they are, bound to it). */
function broken(breakage: Breakage): CheckpointStore {
  const inner = new MemoryCheckpointStore();
  return new Proxy(inner, {
    get(target, property) {
      const replace = breakage[property as keyof Breakage];
      if (replace) return replace(target);
      const value = Reflect.get(target, property, target) as unknown;
      return typeof value === 'function' ? (value as (...args: unknown[]) => unknown).bind(target) : value;
    },
  });
}

/** Runs every stream case on a fresh store from `make`; returns the titles of those that failed. */
async function failingCases(make: () => CheckpointStore): Promise<string[]> {
  const cases: { title: string; fn: (fx: StoreFixture) => Promise<void> }[] = [];
  streamCases((title, fn) => cases.push({ title, fn }));
  assert.ok(cases.length > 5, 'the stream section registers its cases');
  const failed: string[] = [];
  for (const { title, fn } of cases) {
    const store = make();
    try {
      await store.init();
      await fn({ store, cleanup: () => store.close() });
    } catch {
      failed.push(title);
    } finally {
      await store.close();
    }
  }
  return failed;
}

describe('conformance: the stream section fails a broken store', () => {
  it('control: the memory store as it is passes every stream case', async () => {
    assert.deepEqual(await failingCases(() => broken({})), []);
  });

  it('a store that ignores the fence of appendEvents fails', async () => {
    const failed = await failingCases(() => broken({ appendEvents: (inner) => (runId: string, events: never) => inner.appendEvents(runId, events) }));
    assert.ok(
      failed.some((title) => /LEASE_LOST/.test(title)),
      `the fencing case fails (failed: ${failed.join(' | ')})`,
    );
  });

  it('a store whose readEvents delivers an event twice fails', async () => {
    const failed = await failingCases(() =>
      broken({
        readEvents: (inner) => async (runId: string, from: number, limit: number) => {
          const events: StoredStreamEvent[] = await inner.readEvents(runId, from, limit);
          return events.length > 0 ? [events[0], ...events] : events;
        },
      }),
    );
    assert.ok(failed.length > 0, 'some case fails');
  });

  it('a store whose readEvents skips an event fails', async () => {
    const failed = await failingCases(() =>
      broken({ readEvents: (inner) => async (runId: string, from: number, limit: number) => (await inner.readEvents(runId, from, limit)).filter((e) => e.offset !== 1) }),
    );
    assert.ok(failed.length > 0, 'some case fails');
  });

  it('a store whose waitForEvents never wakes fails', async () => {
    // The cases bound their waits with AbortSignal.timeout, whose timer does not keep the process alive.
    const keepAlive = setInterval(() => undefined, 1_000);
    const failed = await failingCases(() =>
      broken({
        waitForEvents: () => async (_runId: string, _from: number, signal: AbortSignal) =>
          signal.aborted ? false : new Promise<boolean>((resolve) => signal.addEventListener('abort', () => resolve(false), { once: true })),
      }),
    ).finally(() => clearInterval(keepAlive));
    assert.ok(failed.length > 0, 'some case fails');
  });
});
