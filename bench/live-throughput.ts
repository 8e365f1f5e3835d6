import { Client } from 'pg';
import { Agent, Pipeline, Step, type CheckpointStore, type StepContext, type StreamEvent } from '../src/index';
import type { Backend, BenchEnvironment } from './environment';
import { bytes, count, ratio, section, type Section } from './report';

/*
 * Live output (issue 37), the writing side: how many parts per second one run's step can emit, against the
 * floor of the same parts appended straight to the store (batches of 64, one append in flight, as the writer
 * batches at least), and on PostgreSQL how many bytes a stored part takes against its JSON.
 */

/** How many parts the measured step emits (set per run of the figure). */
let partsPerRun = 20_000;
const WORDS = ['the', ' quick', ' brown', ' fox', ' jumps', ' over', ' a', ' lazy', ' dog.'];
/** A ~20-byte part as an LLM text stream gives them. */
const part = (i: number) => ({ d: WORDS[i % WORDS.length], i });

class Streamer extends Agent {
  @Step() async stream(ctx: StepContext) {
    for (let i = 0; i < partsPerRun; i++) {
      ctx.emit(part(i));
      // A model stream arrives over I/O: let the event loop (and the writer's appends) turn every 100 parts.
      if (i % 100 === 99) await new Promise((resolve) => setImmediate(resolve));
    }
    return { streamed: partsPerRun };
  }
}
@Pipeline({ name: 'bench-live-output', version: '1', agents: [Streamer] })
class LiveOutputPipeline {}

const BACKENDS: Backend[] = ['postgres', 'redis', 'sqlite', 'memory'];

/** Parts per second of the floor: the run's events appended through the store in batches of 64, one at a time. */
async function floorRate(store: CheckpointStore, runId: string): Promise<number> {
  if (!store.appendEvents) throw new Error('the store keeps no streams');
  const events: StreamEvent[] = Array.from({ length: partsPerRun }, (_, i) => ({ kind: 'part', step: 'Streamer/stream', attempt: 1, data: JSON.stringify(part(i)) }));
  const started = performance.now();
  for (let i = 0; i < events.length; i += 64) await store.appendEvents(runId, events.slice(i, i + 64));
  return partsPerRun / ((performance.now() - started) / 1000);
}

/**
 * Average stored bytes of a part of `runId` (its share of the batch rows, TOAST-compressed as stored,
 * without indexes), and of its JSON. One row per append (migration V7): the run's rows hold its parts and
 * its two status events.
 */
async function pgPartBytes(url: string, schema: string, runId: string): Promise<{ stored: number; json: number }> {
  const client = new Client({ connectionString: url });
  await client.connect();
  try {
    const { rows } = await client.query<{ stored: string; events: string }>(
      `SELECT sum(pg_column_size(b.*)) AS stored, sum(b.count) AS events FROM "${schema}".waypoint_stream_batches b WHERE b.run_id = $1`,
      [runId],
    );
    let json = 0;
    for (let i = 0; i < partsPerRun; i++) json += JSON.stringify(part(i)).length;
    return { stored: Number(rows[0].stored) / Number(rows[0].events), json: json / partsPerRun };
  } finally {
    await client.end();
  }
}

/**
 * The live-output figure: per backend, the median over rounds of (a run emitting `parts` parts, run start to
 * completion, every part stored) and of the floor, alternating.
 */
export async function liveOutputFigure(env: BenchEnvironment, options: { quick: boolean }, progress: (line: string) => void): Promise<Section> {
  partsPerRun = options.quick ? 4_000 : 20_000;
  const rounds = options.quick ? 2 : 3;
  const out = section(
    'live-output-throughput',
    'Live output: parts per second of one run, stored bytes per part',
    `one step emits ${partsPerRun} parts of ~20 bytes (yielding every 100), run start to completion; floor: the same parts through store.appendEvents, 64 per append, one at a time; median of ${rounds} alternating rounds`,
    ['backend', 'run: parts/s', '64 per append: parts/s', 'run / that', 'stored bytes per part (JSON)'],
  );
  for (const backend of BACKENDS) {
    progress(`live output: ${backend}`);
    const { waypoint } = await env.waypoint(backend, { name: 'live' });
    const runs: number[] = [];
    const floors: number[] = [];
    let lastRun = '';
    for (let round = 0; round < rounds; round++) {
      const runId = `live-${round}`;
      const started = performance.now();
      await waypoint.run(LiveOutputPipeline, { runId, input: {} });
      runs.push(partsPerRun / ((performance.now() - started) / 1000));
      lastRun = runId;
      await waypoint.prepare(LiveOutputPipeline, { runId: `floor-${round}`, input: {} });
      floors.push(await floorRate(waypoint.store, `floor-${round}`));
    }
    const run = median(runs);
    const floor = median(floors);
    const size = backend === 'postgres' ? await pgPartBytes(env.pgUrl, env.pgSchema('live'), lastRun) : null;
    out.rows.push([
      backend,
      count(Math.round(run)),
      count(Math.round(floor)),
      ratio(run / floor),
      size ? `${bytes(size.stored)} (${bytes(size.json)}): ${ratio(size.stored / size.json)}` : '',
    ]);
    out.figures[backend] = { partsPerSecond: run, floorPartsPerSecond: floor, runs, floors, ...(size ? { storedBytesPerPart: size.stored, jsonBytesPerPart: size.json } : {}) };
  }
  const pg = out.figures.postgres as { partsPerSecond: number; storedBytesPerPart: number; jsonBytesPerPart: number } | undefined;
  if (pg) {
    out.notes.push(`Target (issue 37): ≥ 20,000 parts/s of ~20 bytes per run on PostgreSQL: ${pg.partsPerSecond >= 20_000 ? 'met' : 'MISSED'} (${Math.round(pg.partsPerSecond)}).`);
    const stored = pg.storedBytesPerPart / pg.jsonBytesPerPart;
    out.notes.push(
      `Target (issue 37): stored bytes per part ≤ 2x its JSON: ${stored <= 2 ? 'met' : 'MISSED'} (${ratio(stored)}; one batch row per append, without indexes, as stored: PostgreSQL compresses a row over about 2 KB).`,
    );
  }
  out.notes.push('A step that emits nothing: see the live-output-quiet-steps figure (streams available vs. hidden, same run).');
  return out;
}

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)];
}
