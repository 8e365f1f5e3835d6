import { createHash } from 'node:crypto';
import { promisify } from 'node:util';
import { gunzip, gzip } from 'node:zlib';
import { ArchiveUnavailableError, type ArchiveBatch, type ArchiveEntry, type ArchiveSink } from '../../contract/archive-sink';
import type { OperationRecord, RunRecord, StepRecord } from '../../contract/checkpoint-store';
import { CheckpointCorruptedError } from '../../contract/errors';
import { WaypointError } from '../../contract/waypoint-error';

const gzipAsync = promisify(gzip);
const gunzipAsync = promisify(gunzip);

/** Marks an archive object's JSON, so a reader of a later release knows what it holds. */
const OBJECT_FORMAT = 'waypoint-archive/1';
const MANIFEST_FORMAT = 'waypoint-archive-manifest/1';

/**
 * The object layout every built-in archive sink shares, over three storage primitives (put, get, list):
 *
 *   runs/<run id, percent-encoded>/manifest.json                       the run's entries (JSON)
 *   runs/<run id>/<kind>-<from>-<to>-<digest of the last row>.json.gz  one batch (gzip JSON)
 *
 * A run's archive is found from its id alone (its manifest), never by listing the store. An object's name
 * comes from its content (kind, range, last row's digest, which chains every row before it, and a pruned
 * run's status), so writing the same batch again names the same object: when the manifest already lists
 * it, nothing is uploaded (a retried prune or compaction writes no second copy), and rows that differ can
 * never overwrite it. The object goes first, the manifest after it; an object the manifest does not list yet (a crash in
 * between) is written again, byte for byte the same, by the retry.
 *
 * @example
 * class MemoryObjects extends ObjectArchiveSink {
 *   readonly where = 'in memory';
 *   private readonly objects = new Map<string, Buffer>();
 *   protected async putObject(path: string, body: Buffer) { this.objects.set(path, body); }
 *   protected async getObject(path: string) { return this.objects.get(path) ?? null; }
 *   protected async listRunFolders() { return [...new Set([...this.objects.keys()].map((p) => p.split('/')[1]))]; }
 * }
 */
export abstract class ObjectArchiveSink implements ArchiveSink {
  /** Where the objects are, for messages (`s3://bucket/prefix`, a directory). */
  abstract readonly where: string;
  /** Stores `body` at `path` (relative to the sink's root), durably, replacing what was there. */
  protected abstract putObject(path: string, body: Buffer, role: 'batch' | 'manifest'): Promise<void>;
  /** The bytes at `path`, or null when there is no such object. */
  protected abstract getObject(path: string): Promise<Buffer | null>;
  /** The folder names under `runs/` (percent-encoded run ids). */
  protected abstract listRunFolders(): Promise<string[]>;

  async write(batch: ArchiveBatch): Promise<ArchiveEntry> {
    if (batch.steps.length === 0 && !batch.run)
      throw new WaypointError('INVALID_ARGUMENT', `An archive batch of run '${batch.runId}' holds neither rows nor the run row: nothing to write.`, { runId: batch.runId });
    const body = await gzipAsync(Buffer.from(JSON.stringify({ format: OBJECT_FORMAT, ...batch }), 'utf8'));
    const entry = entryFor(batch, body);
    const manifest = await this.manifest(batch.runId);
    // The same key means the same rows (the chain) and run status: the first copy stays, byte for byte,
    // so a run restored and pruned again keeps the run row it was first archived with (its creation time).
    const listed = manifest.find((e) => e.key === entry.key);
    if (listed) return listed;
    await this.guard('write an archive object', batch.runId, () => this.putObject(objectPath(batch.runId, entry.key), body, 'batch'));
    const next = [...manifest.filter((e) => e.key !== entry.key), entry].sort(byRange);
    const text = JSON.stringify({ format: MANIFEST_FORMAT, runId: batch.runId, entries: next }, null, 1);
    await this.guard('write the manifest', batch.runId, () => this.putObject(manifestPath(batch.runId), Buffer.from(text, 'utf8'), 'manifest'));
    return entry;
  }

  async entries(runId: string): Promise<ArchiveEntry[]> {
    return this.manifest(runId);
  }

  async read(entry: ArchiveEntry): Promise<ArchiveBatch> {
    const body = await this.guard('read an archive object', entry.runId, () => this.getObject(objectPath(entry.runId, entry.key)));
    if (body === null) throw new CheckpointCorruptedError(entry.runId, entry.fromSequence, `archive object ${entry.key} listed in the manifest is missing from ${this.where}`);
    return decodeBatch(entry, body);
  }

  async runIds(): Promise<string[]> {
    const folders = await this.guard('list archived runs', undefined, () => this.listRunFolders());
    return folders.map((folder) => decodeURIComponent(folder)).sort();
  }

  /** The run's manifest entries ([] when it has none). */
  protected async manifest(runId: string): Promise<ArchiveEntry[]> {
    const bytes = await this.guard('read the manifest', runId, () => this.getObject(manifestPath(runId)));
    if (bytes === null) return [];
    try {
      const parsed = JSON.parse(bytes.toString('utf8')) as { format?: string; runId?: string; entries?: ArchiveEntry[] };
      // plain Error: the clause the typed error below wraps as its cause.
      if (parsed.format !== MANIFEST_FORMAT || parsed.runId !== runId || !Array.isArray(parsed.entries)) throw new Error('not a manifest of this run');
      return parsed.entries.map((e) => ({ ...e, archivedAt: new Date(e.archivedAt) }));
    } catch (error) {
      throw new CheckpointCorruptedError(runId, 0, `the archive manifest ${manifestPath(runId)} in ${this.where} cannot be read (${(error as Error).message})`);
    }
  }

  /** Runs one storage call, turning a failure that is not already typed into `ArchiveUnavailableError`. */
  protected async guard<T>(operation: string, runId: string | undefined, call: () => Promise<T>): Promise<T> {
    try {
      return await call();
    } catch (error) {
      if (error instanceof WaypointError) throw error;
      throw new ArchiveUnavailableError(this.where, operation, error, runId);
    }
  }
}

/** A run's folder name: its id percent-encoded, dots too (no `.` or `..` segment, no separator). */
export function runFolder(runId: string): string {
  return encodeURIComponent(runId).replace(/\./g, '%2E').replace(/\*/g, '%2A');
}

export function manifestPath(runId: string): string {
  return `runs/${runFolder(runId)}/manifest.json`;
}

export function objectPath(runId: string, key: string): string {
  return `runs/${runFolder(runId)}/${key}.json.gz`;
}

/** The entry of `batch` stored as `body`: its deterministic key, range and digests. */
export function entryFor(batch: ArchiveBatch, body: Buffer): ArchiveEntry {
  const first = batch.steps[0];
  const last = batch.steps[batch.steps.length - 1];
  const fromSequence = first?.sequence ?? 0;
  const toSequence = last?.sequence ?? batch.run?.lastSequence ?? 0;
  const lastDigest = last?.sha256 ?? '';
  const tag = createHash('sha256')
    .update(`${lastDigest}\n${batch.run?.status ?? ''}`)
    .digest('hex')
    .slice(0, 16);
  const key = `${batch.kind}-${pad(fromSequence)}-${pad(toSequence)}-${tag}`;
  return {
    runId: batch.runId,
    key,
    kind: batch.kind,
    fromSequence,
    toSequence,
    rows: batch.steps.length,
    lastDigest,
    bytes: body.length,
    sha256: createHash('sha256').update(body).digest('hex'),
    archivedAt: new Date(),
  };
}

/** Reads a batch back from its stored bytes, refusing bytes that are not the ones its entry recorded. */
export async function decodeBatch(entry: ArchiveEntry, body: Buffer): Promise<ArchiveBatch> {
  const digest = createHash('sha256').update(body).digest('hex');
  if (digest !== entry.sha256) {
    throw new CheckpointCorruptedError(entry.runId, entry.fromSequence, `archive object ${entry.key} was altered: its SHA-256 is ${digest}, the manifest recorded ${entry.sha256}`);
  }
  let parsed: ArchiveBatch & { format?: string };
  try {
    parsed = JSON.parse((await gunzipAsync(body)).toString('utf8')) as ArchiveBatch & { format?: string };
  } catch (error) {
    throw new CheckpointCorruptedError(entry.runId, entry.fromSequence, `archive object ${entry.key} cannot be decoded (${(error as Error).message})`);
  }
  if (parsed.format !== OBJECT_FORMAT || parsed.runId !== entry.runId || !Array.isArray(parsed.steps)) {
    throw new CheckpointCorruptedError(entry.runId, entry.fromSequence, `archive object ${entry.key} does not hold rows of run '${entry.runId}'`);
  }
  return {
    runId: parsed.runId,
    kind: parsed.kind,
    run: parsed.run ? reviveRun(parsed.run) : undefined,
    steps: parsed.steps.map(reviveStep),
    operations: parsed.operations?.map(reviveOperation),
    ...(parsed.stream ? { stream: parsed.stream.map((event) => ({ ...event, createdAt: new Date(event.createdAt) })) } : {}),
  };
}

/** A step row read back from JSON: its instants as Dates again (the digest covers them to the millisecond). */
export function reviveStep(row: StepRecord): StepRecord {
  return { ...row, startedAt: new Date(row.startedAt), completedAt: new Date(row.completedAt) };
}

function reviveRun(run: RunRecord): RunRecord {
  return { ...run, createdAt: new Date(run.createdAt), updatedAt: new Date(run.updatedAt), leaseExpiresAt: run.leaseExpiresAt === null ? null : new Date(run.leaseExpiresAt) };
}

function reviveOperation(op: OperationRecord): OperationRecord {
  return { ...op, createdAt: new Date(op.createdAt), updatedAt: new Date(op.updatedAt) };
}

function pad(sequence: number): string {
  return String(sequence).padStart(12, '0');
}

function byRange(a: ArchiveEntry, b: ArchiveEntry): number {
  return a.fromSequence - b.fromSequence || a.toSequence - b.toSequence || a.key.localeCompare(b.key);
}
