import 'reflect-metadata';
import { strict as assert } from 'node:assert';
import { describe, it } from 'node:test';
import { crashTest } from '../../src/testing/index';
import { EmailFromPlainStep, EmailFromSideEffect, mailerModule } from './email-pipelines';
import { observeWorld } from './world';

describe('crashTest on straight-line pipelines (memory store)', () => {
  it('catches an email sent from a plain @Step, naming the step and the point', async () => {
    const report = await crashTest(EmailFromPlainStep, { input: { orderId: 'o-1' }, modules: [mailerModule], observe: observeWorld });
    assert.equal(report.ok, false);
    const problem = report.problems.find((p) => p.kind === 'observed-differs' && p.step === 'NotifyPlain/notify');
    assert.ok(problem, report.summary);
    assert.match(problem.point, /^before-step-row NotifyPlain\/notify #1$/);
    assert.match(problem.message, /observed 'emails' changed by 2, but by 1/);
    assert.match(problem.message, /step 'NotifyPlain\/notify'/);
  });

  it('passes the same pipeline with the email sent through a @SideEffect', async () => {
    const report = await crashTest(EmailFromSideEffect, { input: { orderId: 'o-1' }, modules: [mailerModule], observe: observeWorld });
    assert.ok(report.ok, report.summary);
    assert.ok(report.points.length >= 6, `points: ${report.points.map((p) => p.id).join(', ')}`);
    assert.ok(report.points.every((p) => p.reached));
    const mail = report.effects.find((e) => e.operation === 'send-email');
    assert.equal(mail?.reference, 1);
    // Crashed between the email and its record, the email went out again with the same key (deduplicated by the outbox).
    assert.equal(mail?.byPoint['after-effect NotifyGuarded/notify send-email #1'], 2);
  });
});
