import { strict as assert } from 'node:assert';
import { type CheckpointStore, type RunStreamStore, type StoredStreamEvent, type StreamEvent, supportsStreams } from '../contract/checkpoint-store';
import type { StoreFixture, StoreTest } from './fixture';
import { appendSteps, leasedRun, newRun, stepRecord, withCode } from './store-records';

/**
 * Conformance cases of the optional run-stream capability (`appendEvents`, `readEvents`,
 * `waitForEvents`, `streamLength`: issue 37), run by src/testing/conformance.ts for a store that has
 * it (`supportsStreams`); a store without it skips them. Payloads carry the characters a JSON or script
 * encoding could get wrong. No case measures time: waits are bounded by a generous timeout only.
 */
export function streamCases(test: StoreTest): void {
  const streamTest = (title: string, fn: (store: CheckpointStore & RunStreamStore, fx: StoreFixture) => Promise<void>) =>
    test(title, async (fx) => {
      if (!supportsStreams(fx.store)) return; // the capability is optional: nothing to hold the store to
      await fn(fx.store, fx);
    });

  streamTest('appendEvents assigns offsets 0, 1, 2, ... per run; readEvents reads them back from an offset, in order', async (store) => {
    const epoch = await leasedRun(store, 'r1');
    await leasedRun(store, 'r2');
    assert.equal(await store.streamLength('r1'), 0);
    assert.deepEqual(await store.readEvents('r1', 0, 10), []);
    assert.equal(await store.appendEvents('r1', [running(), part('a/s', 1, TRICKY)], { epoch }), 0);
    assert.equal(await store.appendEvents('r2', [part('b/t', 1, '"other run"')]), 0, 'offsets are per run');
    assert.equal(await store.appendEvents('r1', [{ kind: 'retract', step: 'a/s', attempt: 1 }, part('a/s', 2, '"ünï 🚀"'), waiting()], { epoch }), 2);
    assert.equal(await store.streamLength('r1'), 5);

    const all = await store.readEvents('r1', 0, 100);
    assert.deepEqual(all.map(withoutTime), [
      { offset: 0, kind: 'status', status: 'running' },
      { offset: 1, kind: 'part', step: 'a/s', attempt: 1, data: TRICKY },
      { offset: 2, kind: 'retract', step: 'a/s', attempt: 1 },
      { offset: 3, kind: 'part', step: 'a/s', attempt: 2, data: '"ünï 🚀"' },
      { offset: 4, kind: 'status', status: 'waiting', detail: 'approval' },
    ]);
    for (const event of all) assert.ok(event.createdAt instanceof Date && Math.abs(event.createdAt.getTime() - Date.now()) < 60_000, `offset ${event.offset}: createdAt`);
    assert.deepEqual(
      (await store.readEvents('r1', 2, 2)).map((e) => e.offset),
      [2, 3],
      'from 2, at most 2',
    );
    assert.deepEqual(await store.readEvents('r1', 5, 10), [], 'from the end');
    assert.deepEqual(await store.readEvents('nope', 0, 10), [], 'unknown run');
    assert.equal(await store.streamLength('nope'), 0);
    assert.deepEqual((await store.readEvents('r2', 0, 10)).map(withoutTime), [{ offset: 0, kind: 'part', step: 'b/t', attempt: 1, data: '"other run"' }]);
  });

  streamTest('concurrent appenders of one run (fenced and unfenced) get contiguous offsets, each batch kept together', async (store, fx) => {
    const epoch = await leasedRun(store, 'r1');
    const other = fx.sibling ? fx.sibling() : store;
    if (other !== store) await other.init();
    assert.ok(supportsStreams(other));
    const batches = Array.from({ length: 24 }, (_, i) => Array.from({ length: 1 + (i % 3) }, (_, j) => part(`a/s${i}`, 1, `{"i":${i},"j":${j}}`)));
    const firsts = await Promise.all(
      batches.map((batch, i) => (i % 4 === 3 ? other.appendEvents('r1', [...batch, running()]) : (i % 2 ? other : store).appendEvents('r1', batch, { epoch }))),
    );
    const sizes = batches.map((b, i) => b.length + (i % 4 === 3 ? 1 : 0));
    const total = sizes.reduce((a, b) => a + b, 0);
    const events = await store.readEvents('r1', 0, 1000);
    assert.deepEqual(
      events.map((e) => e.offset),
      Array.from({ length: total }, (_, i) => i),
    );
    assert.equal(await store.streamLength('r1'), total);
    batches.forEach((batch, i) => {
      const at = events.slice(firsts[i], firsts[i] + sizes[i]);
      assert.deepEqual(
        at.slice(0, batch.length).map((e) => (e.kind === 'part' ? e.data : null)),
        batch.map((e) => (e.kind === 'part' ? e.data : null)),
        `batch ${i} is contiguous from its returned offset ${firsts[i]}`,
      );
    });
  });

  streamTest('a fenced append after a lease takeover is refused with LEASE_LOST and writes nothing; unfenced still appends', async (store) => {
    const epoch = await leasedRun(store, 'r1', 'worker-a');
    await store.appendEvents('r1', [part('a/s', 1, '1')], { epoch });
    const grant = await store.acquireLease('r1', 'worker-b', 60_000, 'worker-a');
    assert.ok(grant);
    await assert.rejects(store.appendEvents('r1', [part('a/s', 1, '2'), part('a/s', 1, '3')], { epoch }), withCode('LEASE_LOST'));
    assert.equal(await store.streamLength('r1'), 1, 'the stale batch wrote nothing');
    assert.equal(await store.appendEvents('r1', [{ kind: 'retract', step: 'a/s', attempt: 1 }], { epoch: grant.epoch }), 1);
    assert.equal(await store.appendEvents('r1', [{ kind: 'status', status: 'cancelled' }]), 2, 'unfenced (a cancel from another process)');
    await assert.rejects(store.appendEvents('nope', [part('a/s', 1, '1')], { epoch: 1 }), withCode('LEASE_LOST'), 'unknown run, fenced: as appendStep');
    await assert.rejects(store.appendEvents('nope', [running()]), withCode('RUN_NOT_FOUND'), 'unknown run, unfenced');
    assert.equal(await store.streamLength('nope'), 0);
    assert.deepEqual(
      (await store.readEvents('r1', 0, 10)).map((e) => e.kind),
      ['part', 'retract', 'status'],
    );
  });

  streamTest('bad batches and positions are refused with typed errors before anything is written', async (store) => {
    const epoch = await leasedRun(store, 'r1');
    const bad: unknown[][] = [
      [],
      [{ kind: 'part', step: 'a/s', attempt: 1, data: { not: 'a string' } }],
      [part('a/s', 1, '1'), { kind: 'part', step: '', attempt: 1, data: '1' }],
      [{ kind: 'retract', step: 'a/s', attempt: 0 }],
      [{ kind: 'status', status: 'sleeping' }],
      [{ kind: 'shout', step: 'a/s', attempt: 1 }],
    ];
    for (const events of bad) await assert.rejects(store.appendEvents('r1', events as StreamEvent[], { epoch }), withCode('INVALID_STREAM_EVENT'), JSON.stringify(events));
    assert.equal(await store.streamLength('r1'), 0);
    await assert.rejects(store.readEvents('r1', -1, 10), withCode('INVALID_ARGUMENT'));
    await assert.rejects(store.readEvents('r1', 0, 0), withCode('INVALID_ARGUMENT'));
    await assert.rejects(store.readEvents('r1', 1.5, 10), withCode('INVALID_ARGUMENT'));
    await assert.rejects(store.waitForEvents('r1', -1, AbortSignal.timeout(1000)), withCode('INVALID_ARGUMENT'));
  });

  streamTest('waitForEvents resolves at once when the stream already reaches the offset, and false on abort', async (store) => {
    const epoch = await leasedRun(store, 'r1');
    await store.appendEvents('r1', [part('a/s', 1, '1'), part('a/s', 1, '2')], { epoch });
    assert.equal(await store.waitForEvents('r1', 1, AbortSignal.timeout(GENEROUS_MS)), true);
    const controller = new AbortController();
    const waiting = store.waitForEvents('r1', 2, controller.signal);
    setTimeout(() => controller.abort(), 50);
    assert.equal(await waiting, false, 'aborted before offset 2 was appended');
    const aborted = AbortSignal.abort();
    assert.equal(await store.waitForEvents('r1', 5, aborted), false, 'an aborted signal returns at once');
  });

  streamTest('waitForEvents is woken by an append from another store object on the same database (another process)', async (store, fx) => {
    const epoch = await leasedRun(store, 'r1');
    const writer = fx.sibling ? fx.sibling() : store;
    if (writer !== store) await writer.init();
    assert.ok(supportsStreams(writer));
    const signal = AbortSignal.timeout(GENEROUS_MS);
    const waiters = [store.waitForEvents('r1', 0, signal), store.waitForEvents('r1', 0, signal), store.waitForEvents('r1', 1, signal)];
    await new Promise((resolve) => setTimeout(resolve, 100)); // let them block
    await writer.appendEvents('r1', [part('a/s', 1, '"hello"')], { epoch });
    assert.deepEqual(await Promise.all(waiters.slice(0, 2)), [true, true], 'both waiters on offset 0 woke');
    await writer.appendEvents('r1', [running()]);
    assert.equal(await waiters[2], true);
    assert.deepEqual(
      (await store.readEvents('r1', 0, 10)).map((e) => e.kind),
      ['part', 'status'],
    );
  });

  streamTest('deleteRun deletes the stream; compactSteps and truncateSteps leave it', async (store) => {
    const epoch = await leasedRun(store, 'r1');
    await appendSteps(store, 'r1', epoch, 3);
    await store.appendEvents('r1', [part('a/s', 1, '1'), part('a/s', 1, '2')], { epoch });
    await store.compactSteps('r1', stepRecord('r1', 2, { checkpointId: 'base-2' }));
    await store.truncateSteps('r1', 3, { cursorAgent: 0, cursorStep: 2 }, { epoch });
    assert.equal(await store.streamLength('r1'), 2);
    await store.deleteRun('r1');
    assert.equal(await store.streamLength('r1'), 0);
    assert.deepEqual(await store.readEvents('r1', 0, 10), []);
    await store.createRun(newRun('r1'));
    assert.equal(await store.appendEvents('r1', [running()]), 0, 'a run created again under the id starts its stream at 0');
  });

  streamTest("dropStream (when the store has it) deletes one run's events and keeps the run; its stream reads as new", async (store) => {
    if (!store.dropStream) return; // optional: a store without it keeps streams as long as their runs
    const epoch = await leasedRun(store, 'r1');
    await leasedRun(store, 'r2');
    await appendSteps(store, 'r1', epoch, 1);
    await store.appendEvents('r1', [running(), part('a/s', 1, '1'), part('a/s', 1, '2')], { epoch });
    await store.appendEvents('r2', [running()]);
    assert.equal(await store.dropStream('r1'), 3);
    assert.equal(await store.streamLength('r1'), 0);
    assert.deepEqual(await store.readEvents('r1', 0, 10), []);
    assert.equal((await store.getRun('r1'))?.lastSequence, 1, 'the run and its rows stay');
    assert.equal((await store.listSteps('r1')).length, 1);
    assert.equal(await store.streamLength('r2'), 1, "another run's stream is untouched");
    assert.equal(await store.dropStream('r1'), 0, 'a second drop finds nothing');
    assert.equal(await store.dropStream('no-such-run'), 0);
    assert.equal(await store.appendEvents('r1', [running()], { epoch }), 0, 'an append after a drop starts at 0');
  });

  streamTest('with a payload-sealing wrapper, no part data reaches the inner store in clear text', async (store, fx) => {
    if (!fx.inner) return; // not a wrapper: the case does not apply
    const inner = fx.inner;
    assert.ok(supportsStreams(inner), 'a wrapper has streams only over a store that has them');
    const epoch = await leasedRun(store, 'r1');
    await store.appendEvents('r1', [part('a/s', 1, '{"secret":"hunter2"}'), { kind: 'retract', step: 'a/s', attempt: 1 }, running()], { epoch });
    const raw = await inner.readEvents('r1', 0, 10);
    assert.equal(raw.length, 3);
    assert.ok(raw[0].kind === 'part' && !raw[0].data.includes('hunter2'), 'the part is sealed');
    assert.deepEqual(raw.slice(1).map(withoutTime), [
      { offset: 1, kind: 'retract', step: 'a/s', attempt: 1 },
      { offset: 2, kind: 'status', status: 'running' },
    ]);
    const read = await store.readEvents('r1', 0, 10);
    assert.ok(read[0].kind === 'part' && read[0].data === '{"secret":"hunter2"}', 'read back opened');
  });
}

/** Long enough for any healthy store; a hang fails the case instead of the whole run. */
const GENEROUS_MS = 15_000;

/** JSON text a naive encoding would break: escaped quotes, a backslash, a field-like fragment, non-ASCII. */
const TRICKY = '{"t":"a \\" b \\\\ c","f":"\\",\\"kind\\":\\"status\\"","u":"ünï 🚀 \u2028"}';

function part(step: string, attempt: number, data: string): StreamEvent {
  return { kind: 'part', step, attempt, data };
}

function running(): StreamEvent {
  return { kind: 'status', status: 'running' };
}

function waiting(): StreamEvent {
  return { kind: 'status', status: 'waiting', detail: 'approval' };
}

function withoutTime(event: StoredStreamEvent): Omit<StoredStreamEvent, 'createdAt'> {
  const { createdAt: _createdAt, ...rest } = event;
  return rest;
}
