import 'reflect-metadata';
import { strict as assert } from 'node:assert';
import { describe, it } from 'node:test';
import { IsOptional, IsString } from 'class-validator';
import { inject, injectable } from 'inversify';
import { Agent, Pipeline, Step, type StepContext } from '../../src/index';
import { crashTest } from '../../src/testing/index';
import { ShipKeyedByItem, warehouseModule } from './ship-pipelines';
import { Mailer, mailerModule } from './email-pipelines';
import { observeWorld } from './world';

class NoteState {
  @IsString() text!: string;
  @IsOptional() @IsString() approvedBy?: string;
}

@injectable()
class EsbuildCompiled extends Agent {
  constructor(@inject(Mailer) private readonly mailer: Mailer) {
    super();
  }

  @Step()
  async send(ctx: StepContext<NoteState>) {
    await this.mailer.send('x', ctx.state.text);
    return {};
  }
}
// What an esbuild-based transform leaves: the parameter decorators ran, no parameter types were recorded.
Reflect.deleteMetadata('design:paramtypes', EsbuildCompiled);

@Pipeline({ name: 'kit-no-metadata', version: '1.0.0', state: NoteState, agents: [EsbuildCompiled] })
class NoMetadata {}

class Sleepy extends Agent {
  @Step()
  async approve(ctx: StepContext<NoteState>) {
    await ctx.sleep(3 * 86_400_000);
    const { by } = await ctx.waitFor<{ by: string }>('approval');
    return { approvedBy: by };
  }
}

@Pipeline({ name: 'kit-sleep-wait', version: '1.0.0', state: NoteState, agents: [Sleepy] })
class SleepThenApproval {}

describe('crashTest options and refusals', () => {
  it('refuses a class whose constructor parameter types were not recorded, naming it and what to do', async () => {
    await assert.rejects(crashTest(NoMetadata, { input: { text: 'hi' }, modules: [mailerModule] }), (error: Error & { code?: string }) => {
      assert.equal(error.code, 'KIT_METADATA_MISSING');
      assert.match(error.message, /class EsbuildCompiled in pipeline 'kit-no-metadata' takes 1 constructor parameter/);
      assert.match(error.message, /decoratorMetadata/);
      return true;
    });
  });

  it('points: n crashes at a seeded sample of the points, the same for the same seed', async () => {
    const input = { parcels: ['a', 'b', 'c'] };
    const all = await crashTest(ShipKeyedByItem, { input, modules: [warehouseModule], observe: observeWorld });
    const some = await crashTest(ShipKeyedByItem, { input, modules: [warehouseModule], observe: observeWorld, points: 5, seed: 7 });
    const again = await crashTest(ShipKeyedByItem, { input, modules: [warehouseModule], observe: observeWorld, points: 5, seed: 7 });
    assert.equal(some.points.length, 5);
    assert.equal(some.available, all.points.length);
    assert.deepEqual(some.points.map((p) => p.id).sort(), again.points.map((p) => p.id).sort());
    const ids = new Set(all.points.map((p) => p.id));
    assert.ok(some.points.every((p) => ids.has(p.id)));
  });

  it('crashes around a three-day sleep and a wait, sending the signal the run waits for', async () => {
    const report = await crashTest(SleepThenApproval, { input: { text: 'hi' }, signals: { approval: { by: 'ops' } } });
    assert.ok(report.ok, report.summary);
    assert.deepEqual(report.reference.state, { text: 'hi', approvedBy: 'ops' });
    assert.ok(report.points.some((p) => p.operation === 'waypoint:sleep' && p.kind === 'after-effect'));
    assert.ok(report.points.some((p) => p.operation === 'waypoint:wait:approval'));
  });

  it('refuses to compare with a reference run that did not complete', async () => {
    await assert.rejects(crashTest(SleepThenApproval, { input: { text: 'hi' } }), { code: 'KIT_REFERENCE_FAILED', message: /ended waiting \(waiting for signal 'approval'\)/ });
  });
});
