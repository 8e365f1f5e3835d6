import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { Client } from 'pg';
import { Redis } from 'ioredis';
import type { CheckpointStore, StreamEvent } from '../src/index';
import type { BenchEnvironment } from './environment';
import { bytes, ratio, ratioSpread, section, us, type Section } from './report';
import { summarize, type Summary } from './stats';

/*
 * Live output (issue 37), the reading side: how long a part appended in this process takes to reach
 * `waypoint.stream` in another process (p50, p99) on PostgreSQL and Redis, beside the floor of each
 * server's own wake-up (a bare NOTIFY -> LISTEN, a bare XADD -> XREAD BLOCK) measured in alternating
 * rounds; and the bytes a ~20-byte part costs in storage, beside a bare (run, offset, data) table /
 * stream holding the same parts. The reader runs in live-output-reader.ts.
 */

const READER = join(__dirname, 'live-output-reader.js');
const now = () => performance.timeOrigin + performance.now();
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
/** The part of the bytes figure: `{"t":"hello world"}`, 19 bytes of JSON. */
const SMALL_PART = JSON.stringify({ t: 'hello world' });

interface Reader {
  ready: Promise<void>;
  done: Promise<number[]>;
}

function startReader(args: string[]): Reader {
  const child = spawn(process.execPath, [READER, ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  let err = '';
  let signalReady!: () => void;
  const ready = new Promise<void>((resolve) => (signalReady = resolve));
  child.stdout.setEncoding('utf8').on('data', (chunk: string) => {
    out += chunk;
    if (out.includes('ready\n')) signalReady();
  });
  child.stderr.setEncoding('utf8').on('data', (chunk: string) => (err += chunk));
  const done = new Promise<number[]>((resolve, reject) =>
    child.once('close', (code) => {
      const last = out.trim().split('\n').at(-1) ?? '';
      if (code !== 0 || !last.startsWith('{')) reject(new Error(`reader exited ${code}: ${err.slice(0, 400)}`));
      else resolve((JSON.parse(last) as { latencies: number[] }).latencies);
    }),
  );
  return { ready, done };
}

function percentile(values: readonly number[], p: number): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))];
}

interface Round {
  p50: number;
  p99: number;
}

const roundOf = (latencies: number[]): Round => ({ p50: percentile(latencies, 50), p99: percentile(latencies, 99) });

/** One round through Waypoint: a run, a reader following it from 0, `parts` appends `gapMs` apart, then its end. */
async function waypointRound(store: CheckpointStore, backend: string, place: string, runId: string, parts: number, gapMs: number, env: BenchEnvironment): Promise<Round> {
  await store.createRun({ runId, pipelineName: 'bench-stream', pipelineVersion: '1', input: '{}', metadata: '{}' });
  const grant = await store.acquireLease(runId, 'bench-writer', 60_000);
  if (!grant) throw new Error(`no lease on ${runId}`);
  const fence = { epoch: grant.epoch };
  const reader = startReader(['waypoint', backend, place, runId, String(parts), env.pgUrl, env.redisUrl]);
  await reader.ready;
  await sleep(200); // let it read the empty stream and block in waitForEvents
  for (let i = 0; i < parts; i++) {
    const event: StreamEvent = { kind: 'part', step: 'Bench/emit', attempt: 1, data: JSON.stringify({ t: now(), i }) };
    await store.appendEvents!(runId, [event], fence);
    await sleep(gapMs);
  }
  await store.updateRun(runId, { status: 'completed' }, fence);
  await store.appendEvents!(runId, [{ kind: 'status', status: 'completed' }], fence);
  return roundOf(await reader.done);
}

/**
 * One floor round: the server's own wake-up, the same count and spacing. PostgreSQL: one statement that
 * inserts a row and NOTIFYs (a durable commit, as an append is) -> LISTEN; Redis: XADD -> XREAD BLOCK.
 */
async function floorRound(backend: 'postgres' | 'redis', key: string, schema: string, parts: number, gapMs: number, env: BenchEnvironment): Promise<Round> {
  const reader = startReader([backend === 'postgres' ? 'pg-floor' : 'redis-floor', backend, '', key, String(parts), env.pgUrl, env.redisUrl]);
  await reader.ready;
  await sleep(200);
  if (backend === 'postgres') {
    const client = new Client({ connectionString: env.pgUrl });
    await client.connect();
    try {
      await client.query(`CREATE TABLE IF NOT EXISTS "${schema}".latency_floor (i integer NOT NULL, t text NOT NULL)`);
      const text = `WITH ins AS (INSERT INTO "${schema}".latency_floor VALUES ($1, $2) RETURNING t) SELECT pg_notify($3, t) FROM ins`;
      for (let i = 0; i < parts; i++) {
        await client.query({ name: 'latency_floor', text, values: [i, String(now()), key] });
        await sleep(gapMs);
      }
    } finally {
      await client.end();
    }
  } else {
    const client = new Redis(env.redisUrl);
    try {
      for (let i = 0; i < parts; i++) {
        await client.xadd(key, '*', 't', String(now()));
        await sleep(gapMs);
      }
      await client.del(key);
    } finally {
      client.disconnect();
    }
  }
  return roundOf(await reader.done);
}

/** Emit-to-reader latency across processes, PostgreSQL and Redis, each beside its floor. */
async function latencySection(env: BenchEnvironment, quick: boolean, progress: (line: string) => void): Promise<Section> {
  const rounds = quick ? 2 : 5;
  const parts = quick ? 60 : 200;
  const gapMs = 5;
  const out = section(
    'live-output-latency',
    'Live output: append to a reader in another process',
    `${rounds} rounds of ${parts} single-part appends ${gapMs} ms apart (store.appendEvents, fenced), read by waypoint.stream in a child process; floor: the server's bare wake-up in alternating rounds (PostgreSQL: an INSERT + NOTIFY commit -> LISTEN; Redis: XADD -> XREAD BLOCK). Medians over rounds (min–max).`,
    ['backend', 'p50', 'p99', 'floor p50', 'floor p99', 'p50 / floor', 'p99 / floor', 'target (p50 ≤ 20 ms, p99 ≤ 100 ms)'],
  );
  for (const backend of ['postgres', 'redis'] as const) {
    const name = `stream_${backend}`;
    const { store } = await env.waypoint(backend, { name });
    const place = backend === 'postgres' ? env.pgSchema(name) : env.redisPrefix(name);
    const measured: Round[] = [];
    const floors: Round[] = [];
    for (let round = 0; round < rounds; round++) {
      progress(`live output: ${backend} round ${round + 1}/${rounds}`);
      // Alternate which goes first, so both see the same drift of the machine's load.
      const floorKey = backend === 'postgres' ? `wpb_lat_${env.id}`.toLowerCase() : `${env.redisPrefix('floor')}lat:${round}`;
      if (round % 2 === 0) {
        measured.push(await waypointRound(store, backend, place, `lat-${round}`, parts, gapMs, env));
        floors.push(await floorRound(backend, floorKey, place, parts, gapMs, env));
      } else {
        floors.push(await floorRound(backend, floorKey, place, parts, gapMs, env));
        measured.push(await waypointRound(store, backend, place, `lat-${round}`, parts, gapMs, env));
      }
    }
    const p50 = summarize(measured.map((r) => r.p50));
    const p99 = summarize(measured.map((r) => r.p99));
    const f50 = summarize(floors.map((r) => r.p50));
    const f99 = summarize(floors.map((r) => r.p99));
    const r50 = summarize(measured.map((r, i) => r.p50 / floors[i].p50));
    const r99 = summarize(measured.map((r, i) => r.p99 / floors[i].p99));
    const ms = (s: Summary) => us(s.median * 1000);
    const met = p50.median <= 20 && p99.median <= 100;
    out.rows.push([backend, ms(p50), ms(p99), ms(f50), ms(f99), ratioSpread(r50), ratioSpread(r99), met ? 'met' : 'MISSED']);
    out.figures[backend] = { p50Ms: p50, p99Ms: p99, floorP50Ms: f50, floorP99Ms: f99, p50VsFloor: r50, p99VsFloor: r99 };
  }
  out.notes.push(
    'This is the reading side: a part is appended straight to the store. ctx.emit batches parts before appending (its bounded delay adds to what a user sees); measure through ctx.emit once the writing side is merged.',
  );
  return out;
}

/** Stored bytes per ~20-byte part: PostgreSQL events table (heap + index) and Redis stream memory, each beside a bare table / stream. */
async function bytesSection(env: BenchEnvironment, quick: boolean, progress: (line: string) => void): Promise<Section> {
  const n = quick ? 2000 : 10_000;
  const out = section(
    'live-output-bytes',
    'Live output: stored bytes per part',
    `${n} parts of ${SMALL_PART.length} bytes of JSON (${SMALL_PART}) appended 100 per call to one run; PostgreSQL: growth of the stream tables (V6 events and V7 batches) with their indexes and TOAST (pg_total_relation_size); Redis: MEMORY USAGE of the run's stream. Floor: the same parts in a bare (run_id, offset, data) table with its primary key / a bare stream of one field.`,
    ['backend', 'bytes per part', 'floor per part', 'vs floor', 'vs its JSON', 'target (≤ 2x its JSON)'],
  );
  const batch: StreamEvent[] = Array.from({ length: 100 }, () => ({ kind: 'part', step: 'Writer/draft', attempt: 1, data: SMALL_PART }));
  progress('live output: bytes per part, PostgreSQL');
  const pg = await env.waypoint('postgres', { name: 'stream_bytes' });
  const schema = env.pgSchema('stream_bytes');
  const client = new Client({ connectionString: env.pgUrl });
  await client.connect();
  try {
    const size = async (table: string) => Number((await client.query<{ n: string }>(`SELECT pg_total_relation_size($1) AS n`, [`"${schema}".${table}`])).rows[0].n);
    await client.query(`CREATE TABLE "${schema}".floor_events (run_id text NOT NULL, "offset" integer NOT NULL, data text, PRIMARY KEY (run_id, "offset"))`);
    const streamSize = async () => (await size('waypoint_events')) + (await size('waypoint_stream_batches'));
    const before = { events: await streamSize(), floor: await size('floor_events') };
    await pg.store.createRun({ runId: 'bytes', pipelineName: 'bench-stream', pipelineVersion: '1', input: '{}', metadata: '{}' });
    for (let i = 0; i < n; i += 100) await pg.store.appendEvents!('bytes', batch);
    for (let i = 0; i < n; i += 100) {
      await client.query(`INSERT INTO "${schema}".floor_events SELECT 'bytes', g, $1 FROM generate_series($2::int, $3::int) g`, [SMALL_PART, i, i + 99]);
    }
    const stored = ((await streamSize()) - before.events) / n;
    const floor = ((await size('floor_events')) - before.floor) / n;
    out.rows.push(['postgres', bytes(stored), bytes(floor), ratio(stored / floor), ratio(stored / SMALL_PART.length), stored <= 2 * SMALL_PART.length ? 'met' : 'MISSED']);
    out.figures.postgres = { bytesPerPart: stored, floorBytesPerPart: floor };
  } finally {
    await client.end();
  }
  progress('live output: bytes per part, Redis');
  const redis = await env.waypoint('redis', { name: 'stream_bytes' });
  const prefix = env.redisPrefix('stream_bytes');
  const admin = new Redis(env.redisUrl);
  try {
    await redis.store.createRun({ runId: 'bytes', pipelineName: 'bench-stream', pipelineVersion: '1', input: '{}', metadata: '{}' });
    for (let i = 0; i < n; i += 100) await redis.store.appendEvents!('bytes', batch);
    const floorKey = `${prefix}floor-stream`;
    for (let i = 0; i < n; i++) await admin.xadd(floorKey, `${i + 1}-0`, 'd', SMALL_PART);
    const memory = async (key: string) => Number(await admin.call('MEMORY', 'USAGE', key, 'SAMPLES', '0'));
    const stored = (await memory(`${prefix}run:{bytes}:events`)) / n;
    const floor = (await memory(floorKey)) / n;
    out.rows.push(['redis', bytes(stored), bytes(floor), ratio(stored / floor), ratio(stored / SMALL_PART.length), stored <= 2 * SMALL_PART.length ? 'met' : 'MISSED']);
    out.figures.redis = { bytesPerPart: stored, floorBytesPerPart: floor };
  } finally {
    admin.disconnect();
  }
  out.notes.push(
    'One row (PostgreSQL) or stream entry (Redis) per append, not per part (migration V7): its overhead (a tuple header, the run id, offsets, the primary key entry; an entry id and field names) is shared by the parts of the append, and a part costs its data and a few characters of header. The floor stores one row or entry per part, as the store did before V7. The parts here are all alike, and PostgreSQL compresses a batch row over about 2 KB (TOAST), so on PostgreSQL the figure is lower than varied text would give; the Redis figure is uncompressed.',
  );
  return out;
}

/**
 * The live-output group of `npm run bench` (`--only live-output`).
 *
 * @example
 * const sections = await liveOutputFigures(env, { quick: false }, progress);
 */
export async function liveOutputFigures(env: BenchEnvironment, options: { quick: boolean }, progress: (line: string) => void): Promise<Section[]> {
  return [await latencySection(env, options.quick, progress), await bytesSection(env, options.quick, progress)];
}
