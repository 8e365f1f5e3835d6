import 'reflect-metadata';
import { strict as assert } from 'node:assert';
import { after, before, describe, it } from 'node:test';
import { ContainerModule } from 'inversify';
import { NonRetryableError, TOKENS, Waypoint, memoryStorage, type Logger } from '../../src/index';
import { FlowBaseline } from './flow-harness';
import { FLOW_SIZE, FlowCrashPipeline, MemoryLedger, flowInput, flowPipelineModule } from './flow-pipeline';
import { readFlow, verifyFlow, type FlowView } from './flow-verify';

const silent: Logger = { debug() {}, info() {}, warn() {}, error() {} };

/**
 * The control-flow crash pipeline and its checks, dry-run in this process on the memory store: the
 * uncrashed run holds what the crash trials compare against, a run failed at a step inside each construct
 * and resumed passes the checks, and the checks catch a duplicated row, a lost booking and a wrong state.
 */
describe('control-flow crash pipeline and its checks (memory store, in process)', () => {
  let baseline: FlowBaseline;
  let view: FlowView;
  before(async () => {
    baseline = await FlowBaseline.start();
    view = await baseline.run('dry');
  });
  after(() => baseline.close());

  it('runs every construct once: the paths, decisions, bookings, children and state of an uncrashed run', () => {
    const steps = view.root.rows.filter((r) => r.kind === 'step');
    const status = new Map(steps.map((r) => [r.path, r.status]));
    assert.equal(status.get('Planner/plan'), 'completed');
    assert.equal(status.get('parallel[1]/Summarizer/summarize'), 'completed');
    assert.equal(status.get('loop[0]/Counter/note'), 'skipped');
    assert.equal(status.get('loop[1]/Counter/note'), 'completed');
    assert.equal(status.get('loop[2]/Counter/note'), 'skipped');
    assert.equal(status.get('branch[high]/Escalate/escalate'), 'completed');
    assert.equal(status.get(`forEach(processed)[${FLOW_SIZE.items - 1}]/ItemWorker/process`), 'completed');
    assert.equal(steps.length, 1 + 4 + 6 + 2 + FLOW_SIZE.items + 1);
    const decisions = new Map(view.root.rows.filter((r) => r.kind === 'decision').map((r) => [r.path, (JSON.parse(r.output) as { value: unknown }).value]));
    assert.deepEqual([...decisions.keys()].sort(), [
      'branch',
      'forEach(processed)',
      'forEach(reports)',
      'loop[0]#until',
      'loop[1]#until',
      'loop[1]/Counter/note#when',
      'loop[2]#until',
    ]);
    assert.equal(decisions.get('branch'), 'high');
    assert.equal(decisions.get('loop[2]#until'), true);
    assert.equal(view.root.ledgerKeys.length, FLOW_SIZE.items);
    assert.deepEqual(
      view.children.map((c) => c.runId),
      Array.from({ length: FLOW_SIZE.customers }, (_, i) => `dry/reports/${i}`),
    );
    for (const child of view.children) {
      assert.equal(child.status, 'completed');
      assert.equal(child.ledgerKeys.length, 1);
    }
    const state = view.state as Record<string, unknown>;
    assert.deepEqual(state.trail, ['plan', 'web', 'docs', 'summary', 'api', 'bump0', 'bump1', 'note', 'bump2', 'reviewed', 'escalated', 'total']);
    assert.equal(state.summary, 'sum(docs)/no-web');
    assert.equal(state.bumps, 3);
    assert.equal(state.notedAt, 1);
    const invoiced = Array.from({ length: FLOW_SIZE.customers }, (_, i) => (i % 3) * 10 + `customer-${i}`.length).reduce((a, b) => a + b, 0);
    assert.deepEqual(state.total, { items: FLOW_SIZE.items, booked: (FLOW_SIZE.items * (FLOW_SIZE.items + 1)) / 2, reports: FLOW_SIZE.customers, invoiced });
    assert.deepEqual(verifyFlow(view, view, view.state), []);
  });

  it('passes the checks after a failure at a step inside each construct and a resume', async () => {
    const points = ['parallel[1]/Summarizer/summarize', 'loop[1]/Counter/note', 'branch[high]/HumanReview/review', 'forEach(processed)[13]/ItemWorker/process', 'Invoicer/invoice'];
    for (const point of points) {
      const ledger = new MemoryLedger();
      let armed = true;
      // The delay hook runs at the start of every step: it fails the chosen one once, as a crash would.
      const delay = (runId: string, path: string) => {
        if (armed && path === point && (point !== 'Invoicer/invoice' || runId.endsWith('/reports/3'))) {
          armed = false;
          throw new NonRetryableError(`injected failure at ${runId} ${path}`);
        }
        return 0;
      };
      const waypoint = await Waypoint.create({
        modules: [memoryStorage(), new ContainerModule(({ bind }) => void bind(TOKENS.Logger).toConstantValue(silent)), flowPipelineModule(ledger, delay)],
        pipelines: [FlowCrashPipeline],
      });
      try {
        await assert.rejects(waypoint.run(FlowCrashPipeline, { runId: 'dry', input: flowInput('dry', FLOW_SIZE) }));
        assert.equal(armed, false, `${point} was never reached`);
        const resumed = await waypoint.resume('dry');
        assert.equal(resumed.status, 'completed', point);
        const actual = await readFlow(waypoint, 'dry', (id) => Promise.resolve(ledger.rows.filter((r) => r.run_id === id)));
        assert.deepEqual(verifyFlow(actual, view, JSON.parse(JSON.stringify(resumed.state))), [], point);
      } finally {
        await waypoint.close();
      }
    }
  });

  it('reports a duplicated step or decision, a lost or repeated booking, a missing child and a different state', () => {
    const copy = (): FlowView => JSON.parse(JSON.stringify(view)) as FlowView;
    const duplicated = copy();
    const item = duplicated.root.rows.find((r) => r.path === 'forEach(processed)[7]/ItemWorker/process')!;
    const decision = duplicated.root.rows.find((r) => r.path === 'loop[1]#until')!;
    duplicated.root.rows.push({ ...item }, { ...decision });
    duplicated.root.sequences.push(duplicated.root.sequences.length + 1, duplicated.root.sequences.length + 2);
    duplicated.root.lastSequence = duplicated.root.sequences.length;
    assert.deepEqual(verifyFlow(duplicated, view), ["dry: step 'forEach(processed)[7]/ItemWorker/process' recorded 2 times", "dry: decision 'loop[1]#until' recorded 2 times"]);

    const booking = copy();
    const lost = booking.root.ledgerKeys.shift()!;
    booking.children[2].ledgerKeys.push(booking.children[2].ledgerKeys[0]);
    assert.deepEqual(verifyFlow(booking, view), [
      `dry: booking ${lost} is missing from the ledger`,
      `dry/reports/2: booking ${booking.children[2].ledgerKeys[0]} is in the ledger 2 times`,
    ]);

    const orphan = copy();
    orphan.children.pop();
    orphan.children[0].status = 'running';
    const violations = verifyFlow(orphan, view);
    assert.match(violations.join('\n'), /child runs listed under dry: .*expected/);
    assert.match(violations.join('\n'), /dry\/reports\/0: status running, expected completed/);

    const state = copy();
    (state.state as { bumps: number }).bumps = 4;
    assert.deepEqual(verifyFlow(state, view), ["dry: final state differs from the uncrashed run's: $.bumps is 4, expected 3"]);
  });
});
