import 'reflect-metadata';
import { strict as assert } from 'node:assert';
import { randomBytes } from 'node:crypto';
import { describe, it } from 'node:test';
import { ContainerModule } from 'inversify';
import { IsString } from 'class-validator';
import { Agent, MemoryCheckpointStore, Pipeline, Secret, Step, TOKENS, Waypoint, type StepContext, WaypointError, type StepRecord } from '../../src/index';

let executed: string[] = [];

class Stepper extends Agent {
  @Step() a() {
    executed.push('a');
    return { a: 1 };
  }
  @Step() b() {
    executed.push('b');
    return { b: 2 };
  }
  @Step() c(ctx: StepContext<{ a: number; b: number }>) {
    executed.push('c');
    return { c: ctx.state.a + ctx.state.b };
  }
}
@Pipeline({ name: 'integrity', version: '1', agents: [Stepper] })
class Integrity {}

class SecretState {
  @IsString() user!: string;
  @Secret() @IsString() token!: string;
}
class UsesSecret extends Agent {
  @Step() go(ctx: StepContext<SecretState>) {
    return { greeting: `hi ${ctx.state.user}` };
  }
}
@Pipeline({ name: 'secrets', version: '1', state: SecretState, agents: [UsesSecret] })
class Secrets {}

function rows(store: MemoryCheckpointStore, runId: string): StepRecord[] {
  return (store as unknown as { steps: Map<string, StepRecord[]> }).steps.get(runId)!;
}
function bound(store: MemoryCheckpointStore) {
  return new ContainerModule(({ bind }) => {
    bind(TOKENS.CheckpointStore).toConstantValue(store);
  });
}

describe('integrity, encryption and secrets on the memory store', () => {
  it('detects a flipped byte and names run and sequence; fallback re-runs from the last valid checkpoint', async () => {
    const store = new MemoryCheckpointStore();
    const strict = await Waypoint.create({ modules: [bound(store)] });
    await strict.run(Integrity, { runId: 'i1', input: {} });
    const row = rows(store, 'i1')[1];
    row.output = row.output.replace('2', '3');
    await assert.rejects(strict.checkpoint('i1'), (e: WaypointError) => e.code === 'CHECKPOINT_CORRUPTED' && /'i1'/.test(e.message) && /sequence 2/.test(e.message));
    // completed run: loading it fails loudly rather than returning a wrong state
    await assert.rejects(strict.run(Integrity, { runId: 'i1' }), (e: WaypointError) => e.code === 'CHECKPOINT_CORRUPTED');
  });

  it('fallback drops the corrupted row and re-runs the steps after the last valid checkpoint', async () => {
    const store = new MemoryCheckpointStore();
    const first = await Waypoint.create({ modules: [bound(store)] });
    await first.run(Integrity, { runId: 'i2', input: {} });
    const all = rows(store, 'i2');
    assert.equal(all.length, 3);
    // as if the process had paused after step c: the run is resumable, and row 3 is damaged
    await store.updateRun('i2', { status: 'paused' }, null);
    all[2].sha256 = '0'.repeat(64);
    const fallback = await Waypoint.create({ modules: [bound(store)], onCorruption: 'fallback', pipelines: [Integrity] });
    executed = [];
    const result = await fallback.resume('i2');
    assert.deepEqual(executed, ['c']);
    assert.equal(result.state.c, 3);
    assert.equal(rows(store, 'i2').length, 3);
  });

  it('HMAC: a row sealed with one key is refused under another key', async () => {
    const store = new MemoryCheckpointStore();
    const a = await Waypoint.create({ modules: [bound(store)], hmacKey: 'key-one' });
    await a.run(Integrity, { runId: 'h', input: {} });
    assert.ok(rows(store, 'h')[0].sha256.startsWith('hmac-sha256:'));
    const b = await Waypoint.create({ modules: [bound(store)], hmacKey: 'key-two' });
    await assert.rejects(b.checkpoint('h'), (e: WaypointError) => e.code === 'CHECKPOINT_CORRUPTED' && /hmacKey/.test(e.message));
    const none = await Waypoint.create({ modules: [bound(store)] });
    await assert.rejects(none.checkpoint('h'), (e: WaypointError) => /no hmacKey is configured/.test(e.message));
    assert.equal((await a.checkpoint('h')).shared_context.c, 3);
  });

  it('encrypts payloads at rest, rotates keys, and rejects a wrong key clearly', async () => {
    const store = new MemoryCheckpointStore();
    const k1 = randomBytes(32);
    const k2 = randomBytes(32);
    const w1 = await Waypoint.create({ modules: [bound(store)], encryption: { keys: { k1 }, activeKeyId: 'k1' } });
    await w1.run(Secrets, { runId: 's', input: { user: 'ann', token: 'tok-123' } });
    const stored = await store.getRun('s');
    assert.ok(!stored!.input.includes('tok-123'));
    assert.ok(stored!.input.startsWith('wpenc:1:k1:'));
    assert.ok(rows(store, 's')[0].output.startsWith('wpenc:1:k1:'));
    const rotated = await Waypoint.create({ modules: [bound(store)], encryption: { keys: { k1, k2 }, activeKeyId: 'k2' } });
    assert.equal((await rotated.checkpoint('s')).shared_context.token, 'tok-123');
    const wrong = await Waypoint.create({ modules: [bound(store)], encryption: { keys: { k1: k2 }, activeKeyId: 'k1' } });
    await assert.rejects(wrong.checkpoint('s'), (e: WaypointError) => e.code === 'CHECKPOINT_CORRUPTED' && /key id 'k1'/.test(e.message));
    const missing = await Waypoint.create({ modules: [bound(store)], encryption: { keys: { k2 }, activeKeyId: 'k2' } });
    await assert.rejects(missing.checkpoint('s'), (e: WaypointError) => /not configured/.test(e.message));
  });

  it('refuses a @Secret property in clear text when no key is configured, writing nothing', async () => {
    const waypoint = await Waypoint.create({ modules: [bound(new MemoryCheckpointStore())] });
    await assert.rejects(
      waypoint.run(Secrets, { runId: 'x', input: { user: 'ann', token: 't' } }),
      (e: WaypointError) => e.code === 'SECRET_NOT_PROTECTED' && /token/.test(e.message),
    );
    assert.equal(await waypoint.get('x'), null);
  });
});
