import 'reflect-metadata';
import { strict as assert } from 'node:assert';
import { after, afterEach, describe, it } from 'node:test';
import { Waypoint, postgresStorage, sqliteStorage, type RunStreamEvent, type StreamEvent } from '../../src/index';
import { StreamTextView, textOf } from '../../src/cli/stream-text';
import { streamSummaryText } from '../../src/cli/stream-summary';
import { killLiveChildren, spawnNode, waitForLine } from '../helpers/child-process';
import { PG_TEST_URL, dropSchema, schemaFor } from '../helpers/pg-schema';
import { tempSqlitePath } from '../helpers/sqlite-temp';
import { leasedRun } from '../helpers/store-records';
import { CLI, assertExit, assertOneLineError, waypoint as cli } from './cli-harness';

// `runs tail` and the stream line of `runs show` (issue 37): events written with the store's appendEvents,
// read by the real binary in a child process.

const part = (step: string, attempt: number, value: unknown): StreamEvent => ({ kind: 'part', step, attempt, data: JSON.stringify(value) });
const cleanups: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  await killLiveChildren();
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});
after(killLiveChildren);

async function sqliteRun(runId: string) {
  const { file, remove } = tempSqlitePath();
  const wp = await Waypoint.create({ modules: [sqliteStorage({ path: file })] });
  cleanups.push(remove, () => wp.close());
  const epoch = await leasedRun(wp.store, runId);
  const append = (...events: StreamEvent[]) => wp.store.appendEvents!(runId, events, { epoch });
  const end = async (status: 'completed' | 'failed') => (await wp.store.updateRun(runId, { status }, { epoch }), await append({ kind: 'status', status }));
  return { store: `sqlite:${file}`, wp, append, end };
}

describe('the terminal view of a stream (pure)', () => {
  it('joins text deltas inline, heads each step attempt, shows retractions, JSON parts and statuses on lines of their own', () => {
    const view = new StreamTextView();
    const events: RunStreamEvent[] = [
      { offset: 0, kind: 'status', status: 'running' },
      { offset: 1, kind: 'part', step: 'W/draft', attempt: 1, data: 'Hel' },
      { offset: 2, kind: 'part', step: 'W/draft', attempt: 1, data: { type: 'text-delta', text: 'lo' } },
      { offset: 3, kind: 'retract', step: 'W/draft', attempt: 1 },
      { offset: 4, kind: 'part', step: 'W/draft', attempt: 2, data: { type: 'text', text: 'Hi' } },
      { offset: 5, kind: 'part', step: 'W/draft', attempt: 2, data: { type: 'tool-call', toolName: 'search' } },
      { offset: 6, kind: 'status', status: 'waiting', detail: 'approval' },
      { offset: 7, kind: 'part', step: 'W/draft', attempt: 2, data: 'there' },
    ];
    const text = events.map((e) => view.render(e)).join('') + view.end();
    assert.equal(
      text,
      [
        '● running',
        '── W/draft (attempt 1) ──',
        'Hello',
        '⟲ step W/draft attempt 1 withdrawn (its output above will not be recorded)',
        '── W/draft (attempt 2) ──',
        'Hi',
        'W/draft {"type":"tool-call","toolName":"search"}',
        "● waiting for signal 'approval'",
        '── W/draft (attempt 2) ──',
        'there',
        '',
      ].join('\n'),
    );
  });

  it('text is a string part or a text / text-delta object with a string delta; nothing else', () => {
    assert.equal(textOf('a'), 'a');
    assert.equal(textOf({ type: 'text-delta', delta: 'b' }), 'b');
    assert.equal(textOf({ type: 'text-delta', textDelta: 'c' }), 'c');
    assert.equal(textOf({ type: 'reasoning', text: 'd' }), null);
    assert.equal(textOf({ type: 'text' }), null);
    assert.equal(textOf(42), null);
    assert.equal(
      streamSummaryText('r', { events: 20_000, parts: 9_000, retractions: 1, counted: 10_000 }),
      '20000 event(s): 9000 part(s), 1 retraction(s) in the first 10,000 (runs tail r)',
    );
  });
});

describe('runs tail', () => {
  it('--no-follow prints what is stored and stops; --from skips; --json prints the events as waypoint.stream yields them', async () => {
    const { store, append } = await sqliteRun('t1');
    await append({ kind: 'status', status: 'running' }, part('W/draft', 1, 'Hello'), part('W/draft', 1, ' world'), part('W/draft', 1, { score: 3 }));
    const plain = await cli(['--store', store, 'runs', 'tail', 't1', '--no-follow']);
    assertExit(plain, 0, 'tail --no-follow');
    assert.equal(plain.stdout, '● running\n── W/draft (attempt 1) ──\nHello world\nW/draft {"score":3}\n');
    const from = await cli(['--store', store, 'runs', 'tail', 't1', '--no-follow', '--from', '2']);
    assert.equal(from.stdout, '── W/draft (attempt 1) ──\n world\nW/draft {"score":3}\n');
    const json = await cli(['--store', store, '--json', 'runs', 'tail', 't1', '--no-follow', '--from', '3']);
    assert.deepEqual(
      json.stdout
        .trim()
        .split('\n')
        .map((l) => JSON.parse(l) as unknown),
      [{ offset: 3, kind: 'part', step: 'W/draft', attempt: 1, data: { score: 3 } }],
    );
  });

  it('an unknown run is exit 3 with one error line; a bad --from is a usage error', async () => {
    const { store } = await sqliteRun('t2');
    const missing = await cli(['--store', store, 'runs', 'tail', 'nope']);
    assertExit(missing, 3, 'unknown run');
    assertOneLineError(missing, /nope/);
    const bad = await cli(['--store', store, 'runs', 'tail', 't2', '--from', '-1']);
    assertExit(bad, 2, 'bad --from');
  });

  for (const backend of ['sqlite', 'postgres'] as const) {
    it(`follows a run written by another process until it ends (${backend}); a failed run exits 1`, async () => {
      let storeUrl: string;
      let wp: Waypoint;
      if (backend === 'sqlite') ({ store: storeUrl, wp } = await sqliteRun('t3'));
      else {
        const schema = schemaFor('cli runs tail follow');
        await dropSchema(schema);
        wp = await Waypoint.create({ modules: [postgresStorage({ url: PG_TEST_URL, schema, poolSize: 2 })] });
        cleanups.push(
          () => dropSchema(schema),
          () => wp.close(),
        );
        storeUrl = `${PG_TEST_URL}?schema=${schema}`;
      }
      const epoch = backend === 'sqlite' ? (await wp.store.getRun('t3'))!.leaseEpoch : await leasedRun(wp.store, 't3');
      const append = (...events: StreamEvent[]) => wp.store.appendEvents!('t3', events, { epoch });
      await append({ kind: 'status', status: 'running' });
      const tail = spawnNode(CLI, ['--store', storeUrl, 'runs', 'tail', 't3'], { WAYPOINT_STORE: undefined, WAYPOINT_MODULE: undefined });
      await waitForLine(tail, /^● running$/);
      await append(part('W/draft', 1, 'Hel'), part('W/draft', 1, 'lo'));
      await append({ kind: 'retract', step: 'W/draft', attempt: 1 });
      await append(part('W/draft', 2, 'Bye'));
      await wp.store.updateRun('t3', { status: 'failed' }, { epoch });
      await append({ kind: 'status', status: 'failed', detail: 'boom' });
      const exit = await tail.exited;
      assert.equal(exit.code, 1, exit.stderr);
      assert.equal(
        exit.stdout,
        '● running\n── W/draft (attempt 1) ──\nHello\n⟲ step W/draft attempt 1 withdrawn (its output above will not be recorded)\n── W/draft (attempt 2) ──\nBye\n● failed (boom)\n',
      );
    });
  }
});

describe('runs show: the stream line', () => {
  it('says how many events, parts and retractions the run has, in text and --json', async () => {
    const { store, wp, append } = await sqliteRun('s1');
    const empty = await cli(['--store', store, 'runs', 'show', 's1']);
    assertExit(empty, 0, 'show');
    assert.match(empty.stdout, /\n {2}output {4}no live output\n/);
    await append(
      { kind: 'status', status: 'running' },
      part('W/draft', 1, 'a'),
      { kind: 'retract', step: 'W/draft', attempt: 1 },
      part('W/draft', 2, 'b'),
      part('W/draft', 2, 'c'),
    );
    const shown = await cli(['--store', store, 'runs', 'show', 's1']);
    assert.match(shown.stdout, /\n {2}output {4}5 event\(s\): 3 part\(s\), 1 retraction\(s\) \(runs tail s1\)\n/);
    const json = (await cli(['--store', store, '--json', 'runs', 'show', 's1'])).json<{ stream: unknown }>();
    assert.deepEqual(json.stream, { events: 5, parts: 3, retractions: 1, counted: 5 });
    assert.equal(await wp.store.streamLength!('s1'), 5);
  });
});

describe('prune-streams', () => {
  it('drops the streams of finished runs older than --older-than, keeps the runs; --dry-run only lists; failed is refused', async () => {
    const { store, wp, append, end } = await sqliteRun('p1');
    await append({ kind: 'status', status: 'running' }, part('W/draft', 1, 'a'));
    await end('completed');
    const recent = await cli(['--store', store, 'prune-streams', '--older-than', '1h']);
    assertExit(recent, 0, 'prune-streams 1h');
    assert.match(recent.stdout, /Dropped the streams of 0 completed\/cancelled run\(s\)/);
    await new Promise((r) => setTimeout(r, 1100)); // the run must be older than the 1 s cutoff below
    const dry = await cli(['--store', store, '--json', 'prune-streams', '--older-than', '1s', '--dry-run']);
    assert.deepEqual(dry.json<{ runs: unknown }>().runs, [{ runId: 'p1', events: 3 }]);
    assert.equal(await wp.store.streamLength!('p1'), 3);
    const done = await cli(['--store', store, 'prune-streams', '--older-than', '1s']);
    assertExit(done, 0, 'prune-streams');
    assert.match(done.stdout, /p1 +3\n[\s\S]*Dropped the streams of 1 completed\/cancelled run\(s\) not updated for .* \(3 event\(s\)\); the runs stay\./);
    assert.equal(await wp.store.streamLength!('p1'), 0);
    assert.equal((await wp.store.getRun('p1'))?.status, 'completed');
    const refused = await cli(['--store', store, 'prune-streams', '--older-than', '1s', '--status', 'failed']);
    assertExit(refused, 2, 'prune-streams --status failed');
  });
});
