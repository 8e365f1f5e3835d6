import 'reflect-metadata';
import { strict as assert } from 'node:assert';
import { randomBytes } from 'node:crypto';
import { gunzipSync } from 'node:zlib';
import { after, before, describe, it } from 'node:test';
import { ContainerModule } from 'inversify';
import { GetObjectCommand, HeadObjectCommand, ListObjectsV2Command, PutObjectCommand, type S3Client } from '@aws-sdk/client-s3';
import { TOKENS, TypeOrmCheckpointStore, Waypoint, type WaypointError, type WaypointOptions } from '../../src/index';
import { S3ArchiveSink, type S3ArchiveSinkOptions } from '../../src/integrations/s3';
import { objectPath } from '../../src/core/history/archive-objects';
import { runArchiveSinkConformance } from '../../src/testing';
import { dropSchema, PG_TEST_URL, schemaFor } from '../helpers/pg-schema';
import { S3TestServer } from '../helpers/s3-server';
import { syntheticPipeline } from '../helpers/synthetic-pipeline';
import { assertExit, waypoint as cli } from '../cli/cli-harness';

/**
 * S3ArchiveSink against a real S3-compatible server (s3rver, started here on 127.0.0.1) and the real
 * PostgreSQL: the ArchiveSink conformance suite; compaction and prune into S3, restore, verify, time travel
 * and fork; the server taken away mid-prune; an altered object; encryption on.
 */

const BUCKET = 'waypoint-archive';
const server = new S3TestServer();
let client: S3Client;

before(async () => {
  await server.start();
  await server.createBucket(BUCKET);
  client = server.client();
});
after(async () => {
  client?.destroy();
  await server.dispose();
});

function sinkFor(prefix: string, over: Partial<S3ArchiveSinkOptions> = {}): S3ArchiveSink {
  const { endpoint, region, credentials, forcePathStyle, ...clientConfig } = server.clientConfig();
  return new S3ArchiveSink({ bucket: BUCKET, prefix, endpoint, region, credentials, forcePathStyle, clientConfig, ...over });
}

/** Every key under `prefix`, listed as an operator would. */
async function keysUnder(prefix: string): Promise<string[]> {
  const out = await client.send(new ListObjectsV2Command({ Bucket: BUCKET, Prefix: prefix }));
  return (out.Contents ?? []).map((o) => o.Key!).sort();
}

async function getBytes(key: string): Promise<Buffer> {
  const out = await client.send(new GetObjectCommand({ Bucket: BUCKET, Key: key }));
  return Buffer.from(await out.Body!.transformToByteArray());
}

runArchiveSinkConformance({
  name: 's3 (s3rver)',
  makeSink: (testName) => {
    const prefix = `conformance/${schemaFor(testName)}/`;
    const sink = sinkFor(prefix);
    return Promise.resolve({
      sink,
      cleanup: () => Promise.resolve(sink.close()),
      alter: async (entry) => {
        const key = prefix + objectPath(entry.runId, entry.key);
        const bytes = await getBytes(key);
        bytes[bytes.length >> 1] ^= 0x01;
        await client.send(new PutObjectCommand({ Bucket: BUCKET, Key: key, Body: bytes }));
      },
    });
  },
});

const SECRET = 'PLAINTEXT-MARKER-41';
const Forty = syntheticPipeline({ name: 's3-archive', steps: 40, payloadBytes: 40, stepsPerAgent: 10 });
const FAR_FUTURE = new Date(Date.now() + 86_400_000);

/** A Waypoint on its own PostgreSQL schema with `archive` as retention's sink. */
async function openWaypoint(test: string, archive: S3ArchiveSink, extra: WaypointOptions = {}): Promise<{ waypoint: Waypoint; close: () => Promise<void> }> {
  const schema = schemaFor(`s3-archive ${test}`);
  await dropSchema(schema);
  const store = new TypeOrmCheckpointStore({ type: 'postgres', url: PG_TEST_URL, schema });
  const module = new ContainerModule(({ bind }) => {
    bind(TOKENS.CheckpointStore).toConstantValue(store);
  });
  const waypoint = await Waypoint.create({ ...extra, modules: [module], pipelines: [Forty], retention: { keepLast: 5, compactEvery: 10, archive, ...extra.retention } });
  return {
    waypoint,
    close: async () => {
      await waypoint.close();
      archive.close();
      await dropSchema(schema);
    },
  };
}

describe('retention on S3 (s3rver) and PostgreSQL', () => {
  it('compacts and prunes into S3 (storage class, per-run layout), restores: verify, time travel, fork from an archived checkpoint', async () => {
    const prefix = `whole-${randomBytes(4).toString('hex')}`;
    const { waypoint, close } = await openWaypoint('whole', sinkFor(prefix, { storageClass: 'STANDARD_IA' }));
    try {
      assert.equal((await waypoint.run(Forty, { runId: 'q3/aapl', input: { ticker: 'AAPL' } })).status, 'completed');
      const latest = await waypoint.checkpoint('q3/aapl');
      assert.ok((await waypoint.store.listSteps('q3/aapl')).length <= 15, 'compacted while it ran');
      assert.deepEqual(await waypoint.retention.prune(FAR_FUTURE), ['q3/aapl']);
      assert.equal(await waypoint.get('q3/aapl'), null, 'pruned from PostgreSQL');

      const keys = await keysUnder(`${prefix}/`);
      const folder = `${prefix}/runs/q3%2Faapl/`;
      assert.ok(keys.length >= 3 && keys.every((k) => k.startsWith(folder)), keys.join('\n'));
      assert.ok(keys.includes(`${folder}manifest.json`));
      assert.ok(keys.some((k) => /\/compaction-0+1-0+\d+-[0-9a-f]{16}\.json\.gz$/.test(k)));
      assert.ok(keys.some((k) => /\/prune-\d+-0+40-[0-9a-f]{16}\.json\.gz$/.test(k)));
      for (const key of keys) {
        const head = await client.send(new HeadObjectCommand({ Bucket: BUCKET, Key: key }));
        assert.equal(head.StorageClass ?? 'STANDARD', key.endsWith('manifest.json') ? 'STANDARD' : 'STANDARD_IA', key);
      }
      assert.deepEqual(await (waypoint.retention.options.archive as S3ArchiveSink).runIds(), ['q3/aapl']);

      const report = await waypoint.retention.restore('q3/aapl');
      assert.deepEqual([report.restored, report.rows, report.fromSequence, report.toSequence], ['run', 40, 1, 40]);
      await waypoint.verify('q3/aapl');
      assert.equal((await waypoint.get('q3/aapl'))?.status, 'completed');
      assert.deepEqual((await waypoint.checkpoint('q3/aapl')).shared_context, latest.shared_context);
      assert.deepEqual(Object.keys((await waypoint.checkpoint('q3/aapl', 4)).shared_context).sort(), ['k0', 'k1', 'k2', 'k3', 'ticker']);
      await waypoint.fork('q3/aapl', { newRunId: 'q3/aapl-again', fromSequence: 4 });
      const forked = await waypoint.resume('q3/aapl-again');
      assert.deepEqual([forked.status, forked.stepsSkipped, forked.stepsExecuted], ['completed', 4, 36]);
    } finally {
      await close();
    }
  });

  it('the server stopped mid-prune: nothing is deleted; the retry completes without a second copy', async () => {
    const prefix = `outage-${randomBytes(4).toString('hex')}`;
    /** Takes the server away right after the first batch object is stored, before its manifest. */
    class FailingAfterUpload extends S3ArchiveSink {
      armed = true;
      protected override async putObject(path: string, body: Buffer, role: 'batch' | 'manifest'): Promise<void> {
        await super.putObject(path, body, role);
        if (this.armed && role === 'batch') {
          this.armed = false;
          await server.stop();
        }
      }
    }
    const sink = new FailingAfterUpload({ ...sinkOptions(prefix) });
    const { waypoint, close } = await openWaypoint('outage', sink, { retention: { compactEvery: 0 } });
    try {
      await waypoint.run(Forty, { runId: 'a', input: {} });
      await waypoint.run(Forty, { runId: 'b', input: {} });
      await assert.rejects(
        waypoint.retention.prune(FAR_FUTURE),
        (e: WaypointError) => e.code === 'ARCHIVE_UNAVAILABLE' && /manifest/.test(e.message) && /Nothing was deleted/.test(e.message),
      );
      for (const id of ['a', 'b']) assert.equal((await waypoint.store.listSteps(id)).length, 40, `run ${id} kept whole`);
      await server.start();
      const firstTry = await keysUnder(`${prefix}/`);
      assert.equal(firstTry.filter((k) => k.includes('/prune-')).length, 1, 'one object of the first run reached the server');
      assert.deepEqual((await waypoint.retention.prune(FAR_FUTURE)).sort(), ['a', 'b']);
      const keys = await keysUnder(`${prefix}/`);
      assert.equal(keys.length, 4, keys.join('\n')); // per run: one manifest, one prune object
      assert.ok(
        firstTry.every((k) => keys.includes(k)),
        'the retry wrote the same key',
      );
      for (const id of ['a', 'b']) assert.equal((await sink.entries(id)).length, 1);
      assert.equal((await waypoint.retention.restore('a')).rows, 40);
      await waypoint.verify('a');
    } finally {
      await server.start().catch(() => undefined);
      await close();
    }
  });

  it('an object altered in the bucket is refused as CHECKPOINT_CORRUPTED and nothing is restored (the sink on a client of the caller)', async () => {
    const prefix = `altered-${randomBytes(4).toString('hex')}`;
    const { waypoint, close } = await openWaypoint('altered', new S3ArchiveSink({ bucket: BUCKET, prefix, client }));
    try {
      await waypoint.run(Forty, { runId: 'r', input: {} });
      await waypoint.retention.prune(FAR_FUTURE);
      const key = (await keysUnder(`${prefix}/`)).find((k) => k.includes('/compaction-'))!;
      const bytes = await getBytes(key);
      bytes[20] ^= 0xff;
      await client.send(new PutObjectCommand({ Bucket: BUCKET, Key: key, Body: bytes }));
      await assert.rejects(waypoint.retention.restore('r'), (e: WaypointError) => e.code === 'CHECKPOINT_CORRUPTED' && e.runId === 'r' && /altered/.test(e.message));
      assert.equal(await waypoint.get('r'), null);
    } finally {
      await close();
    }
    // The sink was given the test's own client: closing the sink left it usable.
    assert.ok((await keysUnder(`${prefix}/`)).length > 0);
  });

  it('with encryption and an HMAC key, no object holds plaintext; the restored run opens and verifies', async () => {
    const prefix = `sealed-${randomBytes(4).toString('hex')}`;
    const encryption = { activeKeyId: 'k1', keys: { k1: randomBytes(32) } };
    const { waypoint, close } = await openWaypoint('sealed', sinkFor(prefix), { encryption, hmacKey: 'audit-key' });
    try {
      await waypoint.run(Forty, { runId: 'secret', input: { note: SECRET } });
      await waypoint.retention.prune(FAR_FUTURE);
      const keys = await keysUnder(`${prefix}/`);
      assert.ok(keys.length >= 3);
      for (const key of keys) {
        const raw = await getBytes(key);
        const text = key.endsWith('.gz') ? gunzipSync(raw).toString('utf8') : raw.toString('utf8');
        assert.ok(!text.includes(SECRET), `${key} holds the input in clear text`);
        assert.ok(!text.includes('x'.repeat(40)), `${key} holds a step output in clear text`);
      }
      await waypoint.retention.restore('secret');
      await waypoint.verify('secret');
      assert.equal((await waypoint.checkpoint('secret', 2)).shared_context.note, SECRET);
    } finally {
      await close();
    }
  });
});

describe('the CLI with --archive s3://bucket/prefix (s3rver)', () => {
  it('prune, archive list, archive restore (exit 4 for an altered object), verify', async () => {
    const prefix = `cli-${randomBytes(4).toString('hex')}`;
    const schema = schemaFor('s3-archive cli');
    const { waypoint, close } = await openWaypoint('cli', sinkFor(prefix), { retention: { compactEvery: 0 } });
    try {
      await waypoint.run(Forty, { runId: 'c1', input: {} });
      await waypoint.run(Forty, { runId: 'c2', input: {} });
      const env = { AWS_ACCESS_KEY_ID: 'S3RVER', AWS_SECRET_ACCESS_KEY: 'S3RVER', AWS_REGION: 'us-east-1', AWS_ENDPOINT_URL: undefined, AWS_ENDPOINT_URL_S3: undefined };
      const archive = `s3://${BUCKET}/${prefix}?endpoint=${encodeURIComponent(server.endpoint)}&pathStyle=1&storageClass=STANDARD_IA`;
      const store = `${PG_TEST_URL}?schema=${schema}`;
      const run = (...args: string[]) => cli(['--store', store, ...args], env);
      assertExit(await run('prune', '--older-than', '1ms', '--archive', archive), 0, 'prune');
      assert.equal(await waypoint.get('c1'), null);
      const listed = await run('archive', 'list', '--archive', archive, '--json');
      assertExit(listed, 0, 'archive list');
      assert.deepEqual(listed.json<{ runs: string[] }>().runs, ['c1', 'c2']);
      const objects = await run('archive', 'list', 'c1', '--archive', archive, '--json');
      assert.deepEqual(
        objects.json<{ inStore: boolean; entries: { kind: string; rows: number }[] }>().entries.map((e) => [e.kind, e.rows]),
        [['prune', 40]],
      );
      const key = (await keysUnder(`${prefix}/runs/c2/`)).find((k) => k.endsWith('.json.gz'))!;
      const bytes = await getBytes(key);
      bytes[bytes.length - 3] ^= 0x10;
      await client.send(new PutObjectCommand({ Bucket: BUCKET, Key: key, Body: bytes }));
      const refused = await run('archive', 'restore', 'c2', '--archive', archive);
      assertExit(refused, 4, 'restore of an altered object');
      assert.match(refused.stderr, /CHECKPOINT_CORRUPTED|corrupted/);
      assertExit(await run('archive', 'restore', 'c1', '--archive', archive), 0, 'restore');
      assertExit(await run('verify', 'c1'), 0, 'verify the restored run');
      assertExit(await run('runs', 'show', 'c2'), 3, 'nothing of the refused run was written');
    } finally {
      await close();
    }
  });
});

function sinkOptions(prefix: string): S3ArchiveSinkOptions {
  const { endpoint, region, credentials, forcePathStyle, ...clientConfig } = server.clientConfig();
  return { bucket: BUCKET, prefix, endpoint, region, credentials, forcePathStyle, clientConfig };
}
