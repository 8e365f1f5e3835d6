/**
 * The LangGraph saver's pure pieces, as strings and values: SQL text and DDL of both dialects, Redis key
 * names and index ranges, integrity digests, channel references, and the encryption envelope's
 * compatibility with EncryptingCheckpointStore. The tables on real databases: langgraph-tables.test.ts.
 */
import { strict as assert } from 'node:assert';
import { randomBytes } from 'node:crypto';
import { describe, it } from 'node:test';
import { PayloadCipher } from '../../src/storage/payload-cipher';
import { blobAddress, checkpointDigest, decodeChannelRefs, digest, encodeChannelRefs } from '../../src/integrations/langgraph/records';
import { bytesBefore, langGraphRedisKeys, lexRange } from '../../src/integrations/langgraph/redis-keys';
import { langGraphSchema, langGraphTables } from '../../src/integrations/langgraph/sql-schema';
import { pgLangGraphStatements, pgListCheckpoints } from '../../src/integrations/langgraph/sql-postgres';
import { sqliteLangGraphStatements, sqliteListCheckpoints } from '../../src/integrations/langgraph/sql-sqlite';
import { EncryptingCheckpointStore, MemoryCheckpointStore } from '../../src/index';
import { tableNames } from '../../src/storage/sql/sql';

const pg = langGraphTables(tableNames({ schema: 'wp', prefix: 'waypoint_' }));
const lite = langGraphTables(tableNames({ prefix: 'app_' }));

/** The $n placeholders a statement uses, sorted and unique. */
function placeholders(text: string): number[] {
  return [...new Set([...text.matchAll(/\$(\d+)/g)].map((m) => Number(m[1])))].sort((a, b) => a - b);
}
const upTo = (n: number) => Array.from({ length: n }, (_, i) => i + 1);

describe('LangGraph saver: SQL text', () => {
  it('names its tables after the store: same schema, same prefix', () => {
    assert.deepEqual(
      [pg.threads, pg.checkpoints, pg.blobs, pg.writes],
      ['"wp"."waypoint_langgraph_threads"', '"wp"."waypoint_langgraph_checkpoints"', '"wp"."waypoint_langgraph_blobs"', '"wp"."waypoint_langgraph_writes"'],
    );
    assert.equal(lite.checkpoints, '"app_langgraph_checkpoints"');
    assert.equal(lite.raw.threads, 'app_langgraph_threads');
  });

  it('schema v2: byte-ordered ids on PostgreSQL, STRICT tables on SQLite, content-addressed blobs', () => {
    const pgDdl = langGraphSchema('postgres', tableNames({ schema: 'wp', prefix: 'waypoint_' }));
    assert.equal(pgDdl.length, 5);
    assert.match(pgDdl[2], /checkpoint_id text COLLATE "C" NOT NULL/);
    assert.match(pgDdl[2], /checkpoint bytea NOT NULL/);
    assert.match(pgDdl[3], /PRIMARY KEY \(thread_id, address\)/);
    assert.match(pgDdl[4], /PRIMARY KEY \(thread_id, checkpoint_ns, checkpoint_id, task_id, idx\)/);
    assert.equal(pgDdl[1], 'CREATE INDEX "waypoint_langgraph_threads_updated_idx" ON "wp"."waypoint_langgraph_threads" (updated_at)');
    const liteDdl = langGraphSchema('sqlite', tableNames({ prefix: 'app_' }));
    assert.equal(
      liteDdl[2],
      `CREATE TABLE "app_langgraph_checkpoints" (
  thread_id TEXT NOT NULL,
  checkpoint_ns TEXT NOT NULL,
  checkpoint_id TEXT NOT NULL,
  parent_checkpoint_id TEXT,
  checkpoint_type TEXT NOT NULL,
  checkpoint BLOB NOT NULL,
  metadata_type TEXT NOT NULL,
  metadata BLOB NOT NULL,
  channels TEXT NOT NULL,
  sha256 TEXT NOT NULL,
  created_at INTEGER NOT NULL,
  PRIMARY KEY (thread_id, checkpoint_ns, checkpoint_id)
) STRICT`,
    );
    assert.ok(liteDdl.filter((s) => s.startsWith('CREATE TABLE')).every((s) => s.endsWith(') STRICT')));
  });

  it('postgres: a checkpoint write is two statements, the second conditional on the inherited blobs', () => {
    const sql = pgLangGraphStatements(pg);
    assert.equal(
      sql.lockThread,
      `WITH t AS (
  INSERT INTO "wp"."waypoint_langgraph_threads" (thread_id, created_at, updated_at) VALUES ($1::text, now(), now())
  ON CONFLICT (thread_id) DO UPDATE SET updated_at = now()
  RETURNING thread_id
)
SELECT (SELECT count(*) FROM t)::int AS locked,
  (SELECT channels FROM "wp"."waypoint_langgraph_checkpoints" WHERE thread_id = $1::text AND checkpoint_ns = $2::text AND checkpoint_id = $3::text) AS parent_channels`,
    );
    assert.deepEqual(placeholders(sql.insertCheckpoint), upTo(14));
    assert.match(
      sql.insertCheckpoint,
      /WHERE \(SELECT count\(\*\) FROM "wp"\."waypoint_langgraph_blobs" WHERE thread_id = \$1::text AND address = ANY\(\$14::text\[\]\)\) = cardinality\(\$14::text\[\]\)/,
    );
    assert.match(sql.insertCheckpoint, /ON CONFLICT \(thread_id, address\) DO NOTHING/);
    assert.match(sql.putWrites, /DO UPDATE SET[\s\S]*WHERE excluded\.idx < 0$/);
    assert.deepEqual(placeholders(sql.putWrites), upTo(10));
    assert.match(sql.lockThreadForPrune, /FOR UPDATE$/);
    assert.match(sql.collectBlobs, /NOT IN \(\n  SELECT e\.value->>1 FROM .* CROSS JOIN LATERAL jsonb_each\(c\.channels::jsonb\) e WHERE c\.thread_id = \$1::text\n\)$/);
    for (const [name, text] of Object.entries(sql) as [string, string][]) assert.ok(!text.includes('undefined'), name);
  });

  it('postgres list: only the conditions in use, keyset pagination on (id, thread, namespace)', () => {
    assert.deepEqual(pgListCheckpoints(pg, { limit: 5 }), {
      text:
        'SELECT thread_id, checkpoint_ns, checkpoint_id, parent_checkpoint_id, checkpoint_type, checkpoint, metadata_type, metadata, channels, sha256 ' +
        'FROM "wp"."waypoint_langgraph_checkpoints" ORDER BY checkpoint_id DESC, thread_id DESC, checkpoint_ns DESC LIMIT $1::int',
      values: [5],
    });
    const q = pgListCheckpoints(pg, { threadId: 't', checkpointNs: '', beforeId: 'b', after: { checkpointId: 'c', threadId: 't', checkpointNs: '' }, limit: 100 });
    assert.match(
      q.text,
      / WHERE thread_id = \$1::text AND checkpoint_ns = \$2::text AND checkpoint_id < \$3::text AND \(checkpoint_id, thread_id, checkpoint_ns\) < \(\$4::text, \$5::text, \$6::text\) ORDER BY .* LIMIT \$7::int$/,
    );
    assert.deepEqual(q.values, ['t', '', 'b', 'c', 't', '', 100]);
  });

  it('sqlite: named parameters, JSON arrays for variable-length inputs', () => {
    const sql = sqliteLangGraphStatements(lite);
    assert.match(sql.getBlobs, /address IN \(SELECT value FROM json_each\(@addresses\)\)$/);
    assert.match(sql.getWrites, /\(checkpoint_ns, checkpoint_id\) IN \(SELECT json_extract\(value, '\$\[0\]'\), json_extract\(value, '\$\[1\]'\) FROM json_each\(@keys\)\)$/);
    assert.match(sql.prunable, /row_number\(\) OVER \(PARTITION BY checkpoint_ns ORDER BY checkpoint_id DESC\)/);
    const q = sqliteListCheckpoints(lite, { checkpointNs: 'child', checkpointId: 'x', limit: 3 });
    assert.match(q.text, / WHERE checkpoint_ns = @checkpoint_ns AND checkpoint_id = @checkpoint_id ORDER BY checkpoint_id DESC, thread_id DESC, checkpoint_ns DESC LIMIT @limit$/);
    assert.deepEqual(q.params, { limit: 3, checkpoint_ns: 'child', checkpoint_id: 'x' });
  });
});

describe('LangGraph saver: Redis keys and index ranges', () => {
  it('keys carry the thread as hash tag; members join their parts with NUL', () => {
    const k = langGraphRedisKeys('app:lg:');
    assert.equal(k.checkpoints('t1'), 'app:lg:thread:{t1}:checkpoints');
    assert.equal(k.blobs('t1'), 'app:lg:thread:{t1}:blobs');
    assert.equal(k.writes('t1', 'ns', 'c1'), 'app:lg:thread:{t1}:writes:ns\u0000c1');
    assert.equal(k.writeKeys('t1'), 'app:lg:thread:{t1}:writekeys');
    assert.deepEqual(
      [k.byNamespace('t1'), k.byId('t1'), k.allCheckpoints(), k.threads()],
      ['app:lg:thread:{t1}:by-ns', 'app:lg:thread:{t1}:by-id', 'app:lg:checkpoints', 'app:lg:threads'],
    );
    assert.equal(langGraphRedisKeys().prefix, 'waypoint:lg:');
  });

  it('lexRange selects one namespace, and below a bound, in byte order', () => {
    assert.deepEqual(lexRange({}), { max: '+', min: '-' });
    assert.deepEqual(lexRange({ prefix: 'ns\u0000' }), { max: '(ns\u0001', min: '[ns\u0000' });
    assert.deepEqual(lexRange({ prefix: 'ns\u0000', below: 'ns\u0000c5' }), { max: '(ns\u0000c5', min: '[ns\u0000' });
    assert.deepEqual(lexRange({ below: 'c5' }), { max: '(c5', min: '-' });
    // U+FF5E sorts before U+1F600 in UTF-8 (as Redis compares), after it in UTF-16 (as JS compares).
    assert.equal(bytesBefore('\uff5e', '\u{1f600}'), true);
    assert.equal('\uff5e' < '\u{1f600}', false);
  });
});

describe('LangGraph saver: integrity digests and channel references', () => {
  it('digests separate fields unambiguously and cover every field of a row', () => {
    assert.notEqual(digest(['ab', 'c']), digest(['a', 'bc']));
    assert.notEqual(digest([null]), digest(['']));
    assert.notEqual(digest([1]), digest(['1']));
    const row = {
      threadId: 't',
      checkpointNs: '',
      checkpointId: 'c1',
      parentCheckpointId: null,
      checkpointType: 'json',
      checkpoint: Buffer.from('{}'),
      metadataType: 'json',
      metadata: Buffer.from('{}'),
      channels: '{}',
    };
    const base = checkpointDigest(row);
    assert.match(base, /^[0-9a-f]{64}$/);
    for (const [field, value] of Object.entries({
      threadId: 'u',
      checkpointNs: 'x',
      checkpointId: 'c2',
      parentCheckpointId: 'p',
      checkpointType: 'bytes',
      checkpoint: Buffer.from('{ }'),
      metadata: Buffer.from('[]'),
      channels: '{"a":[1,"x"]}',
    })) {
      assert.notEqual(checkpointDigest({ ...row, [field]: value }), base, field);
    }
    assert.equal(blobAddress('json', Buffer.from('1')), blobAddress('json', new Uint8Array([0x31])));
    assert.notEqual(blobAddress('json', Buffer.from('1')), blobAddress('bytes', Buffer.from('1')));
  });

  it('channel references are canonical (sorted) and keep any channel name as data', () => {
    const refs = new Map<string, readonly [number | string, string]>([
      ['b', [2, 'x']],
      ['__proto__', ['v1', 'y']],
      ['a', [1, 'z']],
    ]);
    const text = encodeChannelRefs(refs);
    assert.equal(text, '{"__proto__":["v1","y"],"a":[1,"z"],"b":[2,"x"]}');
    assert.deepEqual(
      [...decodeChannelRefs(text)],
      [...refs].sort(([x], [y]) => (x < y ? -1 : 1)),
    );
    assert.equal(({} as Record<string, unknown>).v1, undefined, 'no prototype was touched');
    assert.throws(() => decodeChannelRefs('{"a":[1]}'), /malformed/);
    assert.throws(() => decodeChannelRefs('[]'), /not an object/);
  });
});

describe('LangGraph saver: encryption envelope', () => {
  it('is the format of EncryptingCheckpointStore: each opens what the other sealed', async () => {
    const key = randomBytes(32);
    const options = { activeKeyId: 'k1', keys: { k1: key } };
    const cipher = new PayloadCipher(options);
    const inner = new MemoryCheckpointStore();
    const encrypting = new EncryptingCheckpointStore(inner, options);
    await encrypting.createRun({ runId: 'r', pipelineName: 'p', pipelineVersion: '1', input: '{"secret":1}', metadata: '{}' });
    const sealedByStore = (await inner.getRun('r'))!.input;
    assert.match(sealedByStore, /^wpenc:1:k1:/);
    assert.equal(cipher.open(Buffer.from(sealedByStore), 'r:input').toString(), '{"secret":1}');
    await inner.createRun({ runId: 's', pipelineName: 'p', pipelineVersion: '1', input: Buffer.from(cipher.seal(Buffer.from('{"x":2}'), 's:input')).toString(), metadata: '{}' });
    assert.equal((await encrypting.getRun('s'))!.input, '{"x":2}');
    assert.throws(() => cipher.open(cipher.seal(Buffer.from('a'), 'here'), 'there'), /decryption with key id 'k1' failed/);
  });
});
