import 'reflect-metadata';
import { strict as assert } from 'node:assert';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { formatDuration, parseDuration, parseSince } from '../../src/cli/durations';
import { CliError, EXIT, exitCodeForError } from '../../src/cli/exit-codes';
import { scanRun } from '../../src/cli/integrity-scan';
import type { CliIo } from '../../src/cli/output';
import { table } from '../../src/cli/output';
import { Progress } from '../../src/cli/progress';
import { runCli } from '../../src/cli/program';
import { masked, parseStoreUrl } from '../../src/cli/store-url';
import { buildTimeline } from '../../src/cli/timeline';
import { buildRunTree, isFlowRun, type RunTree, type TreeConstruct, type TreeStep } from '../../src/cli/run-tree';
import { renderTree } from '../../src/cli/run-tree-view';
import { readPlan } from '../../src/core/plan/plan-reader';
import { Waypoint, memoryStorage } from '../../src/index';
import { FlowTree } from './flow-module';
import { runRecord } from '../helpers/store-records';
import { loadUserModule } from '../../src/cli/user-module';
import { buildStepRecord, runIdentity } from '../../src/core/history/row-integrity';
import type { StepPlan } from '../../src/core/plan/plan-reader';
import { CheckpointCorruptedError, RunLockedError, StoreUnavailableError } from '../../src/contract/errors';
import type { OperationRecord, RunRecord, StepRecord } from '../../src/contract/checkpoint-store';

function memoryIo(tty = false): CliIo & { stdout: string; stderr: string } {
  const io = { stdout: '', stderr: '', errIsTTY: tty, out: (t: string) => void (io.stdout += t), err: (t: string) => void (io.stderr += t) };
  return io;
}

const T0 = Date.parse('2026-01-18T02:00:00.000Z');

function run(over: Partial<RunRecord> = {}): RunRecord {
  return runRecord({ runId: 'r1', pipelineVersion: '1.0.0', lastSequence: 4, leaseEpoch: 2, createdAt: new Date(T0), updatedAt: new Date(T0 + 10_000), ...over });
}

/** Four sealed step rows; `times[i]` = [start, end] in ms after T0. */
function rows(times: [number, number][], attempts: number[] = []): StepRecord[] {
  const identity = runIdentity(run());
  let prev = '';
  return times.map(([start, end], i) => {
    const row = buildStepRecord(
      {
        runId: 'r1',
        sequence: i + 1,
        step: { agentId: 'A', agentIndex: 0, name: `s${i + 1}`, stepIndex: i, key: `A/s${i + 1}` } as unknown as StepPlan,
        output: JSON.stringify({ n: i }),
        memory: null,
        idempotencyKey: `k${i}`,
        sideEffectsCommitted: false,
        startedAt: new Date(T0 + start),
        completedAt: new Date(T0 + end),
        attempt: attempts[i] ?? 1,
      },
      {},
      { identity, prev },
    );
    prev = row.sha256;
    return row;
  });
}

function failedAttempt(step: string, attempt: number, at: number): OperationRecord {
  return {
    operationKey: `${step}:${attempt}:${at}`,
    runId: 'r1',
    stepKey: step,
    name: `attempt:${attempt}`,
    state: 'failed',
    result: null,
    error: '{"name":"Error","message":"busy","code":null}',
    attempts: 1,
    createdAt: new Date(T0 + at),
    updatedAt: new Date(T0 + at),
  };
}

describe('CLI store URLs', () => {
  it('parses sqlite, postgres and redis URLs and masks passwords', () => {
    const sqlite = parseStoreUrl('sqlite:./data/w.db', '/srv/app');
    assert.deepEqual([sqlite.backend, sqlite.display], ['sqlite', 'sqlite:/srv/app/data/w.db']);
    assert.equal(parseStoreUrl('sqlite:///var/w.db').display, 'sqlite:/var/w.db');
    assert.equal(parseStoreUrl('sqlite:/var/w.db').display, 'sqlite:/var/w.db');
    const pg = parseStoreUrl('postgresql://app:pw@db:5432/app?schema=wp&sslmode=disable');
    assert.deepEqual([pg.backend, pg.display], ['postgres', 'postgresql://app:***@db:5432/app?schema=wp&sslmode=disable']);
    assert.equal(parseStoreUrl('redis://cache:6379?prefix=reports:').backend, 'redis');
    assert.equal(masked('postgres://u:secret@h/d'), 'postgres://u:***@h/d');
  });

  it('refuses other schemes, empty paths and bad identifiers with a usage error', () => {
    for (const bad of ['mysql://db/x', './file.db', 'sqlite:']) {
      assert.throws(
        () => parseStoreUrl(bad),
        (e: CliError) => e.exitCode === EXIT.USAGE,
      );
    }
    assert.throws(() => parseStoreUrl('postgres://h/d?schema=bad-name').module(), { code: 'INVALID_STORE_OPTIONS' });
  });
});

describe('CLI durations', () => {
  it('parses units and compounds, refuses bare numbers and words', () => {
    assert.equal(parseDuration('1h30m'), 5_400_000);
    assert.equal(parseDuration('500ms'), 500);
    assert.equal(parseDuration('7d'), 604_800_000);
    for (const bad of ['30', 'yesterday', '', '5 m', '1h 2m'])
      assert.throws(
        () => parseDuration(bad),
        (e: CliError) => e.exitCode === EXIT.USAGE,
        bad,
      );
    assert.equal(parseSince('2h', new Date(T0)).getTime(), T0 - 7_200_000);
    assert.equal(parseSince('2026-01-18T00:00:00Z').toISOString(), '2026-01-18T00:00:00.000Z');
    assert.deepEqual([formatDuration(850), formatDuration(4_200), formatDuration(185_000), formatDuration(7_800_000)], ['850 ms', '4.20 s', '3 min 5 s', '2 h 10 min']);
  });
});

describe('CLI exit codes', () => {
  it('maps typed errors to documented codes', () => {
    assert.equal(exitCodeForError(new CheckpointCorruptedError('r', 3, 'x')), EXIT.CORRUPTED);
    assert.equal(exitCodeForError(new StoreUnavailableError('postgres', 'init', new Error('down'))), EXIT.STORE_UNAVAILABLE);
    assert.equal(exitCodeForError(new RunLockedError('r', 'w', null)), EXIT.CONFLICT);
    assert.equal(exitCodeForError(new Error('boom')), EXIT.FAILURE);
  });

  it('answers --help with 0 and a bad command line with 2, one line on stderr, without opening a store', async () => {
    const help = memoryIo();
    assert.equal(await runCli(['--help'], help), EXIT.OK);
    assert.match(help.stdout, /Exit codes:/);
    const bad = memoryIo();
    assert.equal(await runCli(['runs', 'list', '--bogus'], bad), EXIT.USAGE);
    assert.match(bad.stderr, /^waypoint: unknown option '--bogus'/);
    const none = memoryIo();
    assert.equal(await runCli(['runs'], none), EXIT.USAGE, 'a command group without a subcommand is a usage error');
    const cases: [string[], RegExp][] = [
      [['runs', 'list', '--status', 'sleeping'], /^waypoint: --status 'sleeping' is not a run status: use one or more of running, paused/],
      [['runs', 'list', '--limit', '0'], /^waypoint: --limit must be an integer >= 1, got '0'/],
      [['runs', 'show', 'x', '--gap-ms', 'soon'], /^waypoint: --gap-ms must be an integer >= 0/],
      [['runs', 'fork', 'x', '--patch', '[1]'], /^waypoint: --patch must be a JSON object/],
      [['runs', 'resume', 'x', '--wait', '10'], /^waypoint: --wait '10' is not a duration/],
      [['prune'], /^waypoint: required option '--older-than <duration>' not specified/],
      [['prune', '--older-than', '1d', '--status', 'running'], /^waypoint: The prune command never deletes running runs/],
      [['compact', '--keep-last', 'all'], /^waypoint: --keep-last must be an integer >= 1/],
    ];
    for (const [args, pattern] of cases) {
      const io = memoryIo();
      assert.equal(await runCli(args, io), EXIT.USAGE, args.join(' '));
      assert.match(io.stderr, pattern, args.join(' '));
    }
  });
});

describe('CLI timeline', () => {
  it('marks a resume at a long pause once the lease was taken again, and not in a single-executor run', () => {
    const steps = rows([
      [0, 10],
      [12, 20],
      [3_000, 3_010],
      [3_012, 3_020],
    ]);
    const timeline = buildTimeline(run(), steps, [], { integrity: {} });
    assert.deepEqual(
      timeline.entries.map((e) => e.resumedBefore?.gapMs ?? null),
      [null, null, 2_980, null],
    );
    assert.equal(timeline.resumes, 1);
    assert.equal(timeline.gapThresholdMs, 100);
    assert.equal(buildTimeline(run({ leaseEpoch: 1 }), steps, [], { integrity: {} }).resumes, 0, 'one lease, one executor');
    assert.equal(buildTimeline(run(), steps, [], { integrity: {}, gapMs: 5_000 }).resumes, 0, '--gap-ms raises the threshold');
    const slowMoment = rows([
      [0, 10],
      [400, 410],
      [3_000, 3_010],
      [3_012, 3_020],
    ]);
    assert.deepEqual(
      buildTimeline(run(), slowMoment, [], { integrity: {} }).entries.map((e) => e.resumedBefore !== null),
      [false, false, true, false],
      'epoch 2 allows one resume: the longest pause, not a slow moment in one process',
    );
    assert.equal(buildTimeline(run({ leaseEpoch: 3 }), slowMoment, [], { integrity: {} }).resumes, 2);
  });

  it('tells a retry in the same process (attempts kept counting) from a resume (attempt numbering restarted)', () => {
    const retried = rows(
      [
        [0, 10],
        [12, 20],
        [2_000, 2_010],
        [2_012, 2_020],
      ],
      [1, 1, 2, 1],
    );
    // Attempt 1 failed right after step 2 (at 30 ms), attempt 2 ran after the retry's back-off: one process.
    const retry = buildTimeline(run(), retried, [failedAttempt('A/s3', 1, 30)], { integrity: {} });
    assert.equal(retry.resumes, 0);
    assert.deepEqual(
      retry.entries[2].failedAttempts.map((f) => [f.attempt, f.error]),
      [[1, 'busy']],
    );
    const restarted = rows([
      [0, 10],
      [12, 20],
      [2_000, 2_010],
      [2_012, 2_020],
    ]);
    const resumed = buildTimeline(run(), restarted, [failedAttempt('A/s3', 1, 500)], { integrity: {} });
    assert.equal(resumed.resumes, 1);
    assert.match(resumed.entries[2].resumedBefore!.why, /numbering restarted/);
  });

  it('attaches side effects to their step and lists unrecorded failures as pending', () => {
    const steps = rows([
      [0, 10],
      [12, 20],
    ]);
    const effect: OperationRecord = { ...failedAttempt('A/s2', 0, 15), name: 'send', state: 'committed', attempts: 2, error: null };
    const timeline = buildTimeline(run({ status: 'failed', lastSequence: 2 }), steps, [effect, failedAttempt('A/s3', 1, 30), failedAttempt('A/s3', 2, 40)], { integrity: {} });
    assert.deepEqual(timeline.entries[1].sideEffects, [{ name: 'send', state: 'committed', attempts: 2, error: null }]);
    assert.deepEqual(
      timeline.pending.map((p) => [p.step, p.failedAttempts.length]),
      [['A/s3', 2]],
    );
  });

  it('scanRun reports every bad row, gaps, and a run row that disagrees with its rows', () => {
    const steps = rows([
      [0, 1],
      [2, 3],
      [4, 5],
      [6, 7],
    ]);
    steps[1] = { ...steps[1], output: '{"n":9}' };
    steps[3] = { ...steps[3], output: '{"n":8}' };
    const problems = scanRun(run({ lastSequence: 5 }), [steps[0], steps[1], steps[3]], {});
    assert.deepEqual(
      problems.map((p) => [p.sequence, p.reason.slice(0, 20)]),
      [
        [2, 'SHA-256 of the store'],
        [3, 'sequence 3 is missin'],
        [5, 'sequence 5 is missin'],
      ],
    );
    const gap = scanRun(
      run({ lastSequence: 4 }),
      [
        rows([
          [0, 1],
          [2, 3],
          [4, 5],
          [6, 7],
        ])[0],
        rows([
          [0, 1],
          [2, 3],
          [4, 5],
          [6, 7],
        ])[3],
      ],
      {},
    );
    assert.deepEqual(
      gap.map((p) => [p.sequence, p.reason]),
      [[2, 'sequences 2 to 3 are missing (the next stored row is 4)']],
    );
  });
});

describe('CLI output', () => {
  it('pads tables, right-aligns numbers', () => {
    assert.equal(
      table(
        ['A', 'N'],
        [
          ['x', '1'],
          ['long', '10'],
        ],
        [false, true],
      ),
      'A      N\nx      1\nlong  10\n',
    );
  });

  it('draws progress in place on a terminal and as plain lines otherwise', () => {
    const plain = memoryIo(false);
    const p = new Progress(plain, 'verify', 3, true);
    p.tick('a');
    p.tick('b');
    p.tick('c');
    p.done();
    assert.equal(plain.stderr, 'verify 1/3 a\nverify 2/3 b\nverify 3/3 c\n');
    const tty = memoryIo(true);
    const bar = new Progress(tty, 'prune', 2, true);
    bar.tick('x');
    bar.tick('y');
    bar.done();
    assert.match(tty.stderr, /^\r\x1b\[2Kprune \[#{12}-{12}\] 1\/2 x\r\x1b\[2Kprune \[#{24}\] 2\/2 y\r\x1b\[2K$/);
    const off = memoryIo(true);
    new Progress(off, 'x', 1, false).tick();
    assert.equal(off.stderr, '');
  });
});

describe('CLI module contract', () => {
  it('loads pipelines and createWaypointOptions, and names the file and the problem otherwise', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'waypoint-module-'));
    try {
      const good = join(dir, 'good.js');
      writeFileSync(good, `exports.createWaypointOptions = () => ({ leaseTtlMs: 1000 });\n`);
      assert.equal(typeof (await loadUserModule(good)).createWaypointOptions, 'function');
      const empty = join(dir, 'empty.js');
      writeFileSync(empty, 'exports.other = 1;\n');
      await assert.rejects(loadUserModule(empty), /exports neither 'pipelines' nor 'createWaypointOptions'/);
      const notClasses = join(dir, 'bad.js');
      writeFileSync(notClasses, 'exports.pipelines = ["x"];\n');
      await assert.rejects(loadUserModule(notClasses), /'pipelines' that is not an array of @Pipeline classes/);
      const undecorated = join(dir, 'plain.js');
      writeFileSync(undecorated, 'exports.pipelines = [class Plain {}];\n');
      await assert.rejects(loadUserModule(undecorated), (e: CliError) => e.exitCode === EXIT.USAGE && /plain\.js/.test(e.message));
      const throwing = join(dir, 'throws.js');
      writeFileSync(throwing, 'throw new Error("config missing");\n');
      await assert.rejects(loadUserModule(throwing), /failed to load: config missing/);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe('CLI run tree of a control-flow run', () => {
  // 1,000 files with item 7 failing on the first run, then resumed: counts, listing limits and child runs.
  const files = Array.from({ length: 1000 }, (_, i) => `f${i}`);
  async function flowRun() {
    const waypoint = await Waypoint.create({ modules: [memoryStorage()], pipelines: [FlowTree] });
    const read = async (plan?: ReturnType<typeof readPlan>) => {
      const loaded = (await waypoint.store.loadRun('flow'))!;
      const children = (await waypoint.store.listRuns({ parentRunId: 'flow' })).filter((c) => c.parentRunId === 'flow');
      return { loaded, tree: buildRunTree(loaded.run, loaded.steps, await waypoint.store.listOperations('flow'), children, plan) };
    };
    return { waypoint, FlowTree, read };
  }
  const find = (tree: RunTree, label: string) => tree.nodes.find((n): n is TreeConstruct => n.kind !== 'step' && n.label === label)!;

  it('counts forEach items by status, lists the first few plus the failed one, and names the decisions', async () => {
    process.env.WAYPOINT_FLOW_FAIL = 'f7';
    const { waypoint, FlowTree, read } = await flowRun();
    try {
      await assert.rejects(waypoint.run(FlowTree, { runId: 'flow', input: { files, customers: ['x', 'y'] } }), { code: 'ITEM_FAILED' });
    } finally {
      delete process.env.WAYPOINT_FLOW_FAIL;
    }
    const { loaded, tree } = await read();
    assert.ok(isFlowRun(loaded.steps, [], undefined));
    assert.deepEqual(
      tree.nodes.map((n) => (n.kind === 'step' ? n.step : `${n.kind}:${n.label}`)),
      ['Planner/plan', 'parallel:parallel', 'loop:loop', 'branch:branch', 'forEach:forEach(reviews)'],
    );
    const reviews = find(tree, 'forEach(reviews)');
    assert.equal(reviews.itemCount, 1000);
    assert.equal(reviews.counts!.failed, 1);
    assert.equal(reviews.counts!.running, 0);
    assert.ok(reviews.counts!.completed >= 7, `completed: ${reviews.counts!.completed}`);
    assert.equal(reviews.counts!.completed + reviews.counts!.pending, 999);
    const failed = reviews.parts.find((p) => p.status === 'failed')!;
    assert.equal(failed.key, '7');
    assert.match((failed.children[0] as TreeStep).error!, /cannot review f7/);

    const lines = renderTree(tree, { items: 3 });
    assert.ok(lines.length < 40, `a 1,000-item forEach printed ${lines.length} lines:\n${lines.join('\n')}`);
    assert.ok(
      lines.some((l) => /^ {4}\[7\] failed$/.test(l)),
      lines.join('\n'),
    );
    assert.ok(
      lines.some((l) => new RegExp(`^  forEach\\(reviews\\): 1000 item\\(s\\): ${reviews.counts!.completed} completed, 1 failed, ${reviews.counts!.pending} pending$`).test(l)),
      lines.join('\n'),
    );
    assert.ok(lines.some((l) => /more item\(s\) not listed .*--items all/.test(l)));
    assert.ok(lines.some((l) => /^  branch: case 'high' chosen, completed$/.test(l)));
    assert.ok(renderTree(tree, { items: 'all' }).filter((l) => /^ {4}\[\d+\] /.test(l)).length >= 1000);

    // With the plan, what has not started shows: the forEach over the child pipeline has not taken its items.
    const planned = (await read(readPlan(FlowTree))).tree;
    const reports = find(planned, 'forEach(reports)');
    assert.deepEqual([reports.kind, reports.itemCount, reports.status], ['forEach', null, 'pending']);
    assert.deepEqual(find(planned, 'branch').cases, ['high', 'low']);
    assert.ok(
      find(planned, 'forEach(reviews)')
        .parts.filter((p) => p.status === 'pending')
        .every((p) => (p.children[0] as TreeStep).status === 'pending'),
    );
    assert.ok(!renderTree(tree, { items: 3 }).some((l) => l.includes('forEach(reports)')), 'without the plan the unstarted forEach is not guessed');

    await waypoint.resume('flow');
    const done = (await read()).tree;
    const loop = find(done, 'loop');
    assert.deepEqual(
      loop.parts.map((p) => [p.key, p.until, p.status]),
      [
        ['0', false, 'completed'],
        ['1', false, 'completed'],
        ['2', true, 'completed'],
      ],
    );
    assert.deepEqual(
      find(done, 'parallel').parts.map((p) => (p.children[0] as TreeStep).step),
      ['Web/search', 'Docs/read'],
    );
    assert.deepEqual(find(done, 'forEach(reviews)').counts, { completed: 1000, skipped: 0, failed: 0, running: 0, queued: 0, pending: 0 });
    const children = find(done, 'forEach(reports)');
    assert.deepEqual(
      children.parts.map((p) => [p.childRunId, p.childRunStatus, p.status]),
      [
        ['flow/reports/0', 'completed', 'completed'],
        ['flow/reports/1', 'completed', 'completed'],
      ],
    );
    const text = renderTree(done, { items: 2 }).join('\n');
    assert.match(text, /^  forEach\(reports\) over child runs: 2 item\(s\): 2 completed$/m);
    assert.match(text, /^ {4}\[1\] completed {2}child run flow\/reports\/1 \(completed\)$/m);
    assert.match(text, /^  loop: 3 iteration\(s\), stopped after iteration 2$/m);
    await waypoint.close();
  });

  it('a straight-line run is not drawn as a tree', () => {
    assert.equal(
      isFlowRun(
        rows([
          [0, 1],
          [2, 3],
        ]),
        [],
        undefined,
      ),
      false,
    );
  });
});

describe('CLI run tree from rows alone', () => {
  /** A row as a store returns it; only what the tree reads is meaningful. */
  const row = (sequence: number, agentId: string, stepName: string, path: string | null, output = '{}', status: StepRecord['status'] = 'completed'): StepRecord =>
    ({
      runId: 'n',
      sequence,
      agentId,
      stepName,
      path,
      output,
      memory: null,
      status,
      attempt: 1,
      startedAt: new Date(T0 + sequence),
      completedAt: new Date(T0 + sequence + 1),
    }) as unknown as StepRecord;
  const decision = (sequence: number, path: string, value: unknown) => row(sequence, '$waypoint', 'decision', path, JSON.stringify({ value }), 'skipped');

  it('nests constructs by path segments, infers kinds from decisions, and marks unfinished items of a running run', () => {
    const steps = [
      decision(1, 'forEach(files)', ['a', 'b', 'c']),
      row(2, 'Fix', 'apply', 'forEach(files)[0]/loop[0]/Fix/apply'),
      decision(3, 'forEach(files)[0]/loop[0]#until', true),
      row(4, 'Fix', 'apply', 'forEach(files)[1]/loop[0]/Fix/apply'),
      decision(5, 'forEach(files)[1]/loop[0]#until', false),
      row(6, 'Fix', 'apply', 'forEach(files)[1]/loop[1]/Fix/apply'),
      decision(7, 'triage', 'urgent'),
      row(8, 'Pager', 'page', 'triage[urgent]/Pager/page'),
      row(9, 'Skip', 'maybe', 'research[0]/Skip/maybe', '{}', 'skipped'),
    ];
    const tree = buildRunTree(run({ runId: 'n', status: 'running' }), steps, [], []);
    const [files, triage, research] = tree.nodes as TreeConstruct[];
    assert.deepEqual([files.kind, triage.kind, research.kind], ['forEach', 'branch', 'group']);
    assert.deepEqual(
      files.parts.map((p) => [p.key, p.status]),
      [
        ['0', 'completed'],
        ['1', 'running'],
        ['2', 'pending'],
      ],
    );
    const loopOf1 = files.parts[1].children[0] as TreeConstruct;
    assert.deepEqual([loopOf1.kind, loopOf1.path, loopOf1.parts.map((p) => p.until)], ['loop', 'forEach(files)[1]/loop', [false, null]]);
    assert.equal((loopOf1.parts[1].children[0] as TreeStep).path, 'forEach(files)[1]/loop[1]/Fix/apply');
    assert.equal(triage.chosen, 'urgent');
    assert.equal(research.status, 'skipped');
    const text = renderTree(tree, { items: 3 }).join('\n');
    assert.match(text, /^  forEach\(files\): 3 item\(s\): 1 completed, 1 running, 1 pending$/m);
    assert.match(text, /^ {6}loop: 2 iteration\(s\), not stopped yet$/m);
    assert.match(text, /^  triage: case 'urgent' chosen, completed$/m);
  });

  it('places the child runs of a forEach nested in a parallel branch under that forEach (ids carry the scope path)', () => {
    const steps = [row(1, 'Lead', 'start', 'parallel[0]/Lead/start'), decision(2, 'parallel[1]/forEach(results)', [1, 2])];
    const child = (index: number, status: RunRecord['status']) => runRecord({ runId: `n/parallel[1]/results/${index}`, parentRunId: 'n', status, leaseEpoch: 1, lastSequence: 1 });
    const children = [child(0, 'completed'), child(1, 'running')];
    const tree = buildRunTree(run({ runId: 'n', status: 'running' }), steps, [], children);
    const lanes = (tree.nodes[0] as TreeConstruct).parts;
    const results = lanes[1].children[0] as TreeConstruct;
    assert.deepEqual([results.kind, results.path], ['forEach', 'parallel[1]/forEach(results)']);
    assert.deepEqual(
      results.parts.map((p) => [p.childRunId, p.status]),
      [
        ['n/parallel[1]/results/0', 'completed'],
        ['n/parallel[1]/results/1', 'running'],
      ],
    );
    assert.deepEqual(tree.otherChildren, [], 'every child is placed under its forEach');
  });
});
