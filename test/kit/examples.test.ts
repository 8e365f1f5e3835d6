import 'reflect-metadata';
import { strict as assert } from 'node:assert';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { after, describe, it } from 'node:test';
import { crashTest } from '../../src/testing/index';
import { DEMO_INPUT as ANALYSIS_INPUT, FinancialAnalysis, exampleModule as analysisModule } from '../../examples/financial-analysis/pipeline';
import { readOutbox as readAnalysisOutbox } from '../../examples/financial-analysis/mailer';
import { CodeReview, DEMO_INPUT as REVIEW_INPUT, exampleModule as reviewModule } from '../../examples/code-review/pipeline';
import { readOutbox as readReviewOutbox } from '../../examples/code-review/outbox';
import { ContractApproval, DEMO_CONTRACT, approvalModule } from '../../examples/approval-workflow/pipeline';
import { readEnvelopes } from '../../examples/approval-workflow/esign';
import { APPROVAL_SIGNAL } from '../../examples/approval-workflow/agents';
import { ResearchDemo, chooseModel, useModel } from '../../examples/ai/agent';

// Each example pipeline crash-tested as its users would: its own services, its provider's outbox observed
// (what was delivered, not what was deduplicated by key). A sample of points keeps the larger ones quick.
describe('crashTest of the examples', () => {
  const dir = mkdtempSync(path.join(tmpdir(), 'waypoint-kit-examples-'));
  after(() => rmSync(dir, { recursive: true, force: true }));

  it('financial-analysis: every point, the report email delivered once', async () => {
    const outboxPath = path.join(dir, 'analysis.jsonl');
    const report = await crashTest(FinancialAnalysis, {
      input: ANALYSIS_INPUT,
      modules: [analysisModule({ llm: { delayMs: 0 }, outboxPath })],
      observe: { emails: () => readAnalysisOutbox(outboxPath).filter((e) => e.status === 'delivered').length },
      ignoreState: ['delivery.messageId'], // the mail provider's id, new on every delivery
    });
    assert.ok(report.ok, report.summary);
    assert.equal(report.reference.observed.emails, 1); // one email to all recipients
  });

  it('code-review (parallel, loop, branch, forEach, child pipelines): a sample of 30 points', async () => {
    const outboxPath = path.join(dir, 'review.jsonl');
    const report = await crashTest(CodeReview, {
      input: REVIEW_INPUT,
      modules: [reviewModule({ llm: { delayMs: 0 }, outboxPath })],
      observe: { emails: () => readReviewOutbox(outboxPath).filter((e) => e.status === 'delivered').length },
      points: 30,
      ignoreState: ['deliveries.*.messageId'],
    });
    assert.ok(report.ok, report.summary);
    assert.equal(report.points.length, Math.min(30, report.available));
  });

  it('ai (a durableModel + durableTools tool loop on the mock model): a sample of 20 points; the kit asks for proof of the one write', async () => {
    const chosen = chooseModel();
    assert.ok('model' in chosen, 'the example picks its mock model without WAYPOINT_AI_PROVIDER');
    useModel(chosen.model);
    // A search and a model call are read-only: a kill between their answer and its record pays for them again, nothing else.
    const repeatable = ['durable:ai:model', 'durable:ai:tool:search:*'];
    const report = await crashTest(ResearchDemo, { input: { question: 'How do durable agent pipelines work?' }, points: 20, seed: 11, repeatable });
    assert.ok(
      report.points.some((p) => p.reached && p.operation !== undefined && p.step.includes('Researcher/research')),
      'points inside the tool loop were crashed',
    );
    // The example's saveNote passes its key to a notes service it only pretends to have: a kill after the note
    // was saved and before its record saves it again, and nothing observed proves the service deduplicated it.
    assert.ok(report.problems.length > 0, 'the unproven write is reported');
    for (const problem of report.problems) {
      assert.equal(problem.kind, 'call-repeated', problem.message); // a durableTools call: a recorded call made again
      assert.match(problem.point, /^after-effect Researcher\/research durable:ai:tool:saveNote:/);
    }
  });

  it('approval-workflow: every point, the legal approval sent as a signal, one envelope', async () => {
    const outboxPath = path.join(dir, 'envelopes.jsonl');
    const report = await crashTest(ContractApproval, {
      input: DEMO_CONTRACT,
      modules: [approvalModule({ outboxPath, clauseMs: 0 })],
      observe: { envelopes: () => readEnvelopes(outboxPath).filter((e) => e.status === 'sent').length },
      signals: { [APPROVAL_SIGNAL]: { approved: true, by: 'legal@acme.dev' } },
      ignoreState: ['envelope.envelopeId'],
    });
    assert.ok(report.ok, report.summary);
    assert.equal(report.reference.observed.envelopes, 1);
  });
});
