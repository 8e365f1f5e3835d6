import { createHash, randomBytes } from 'node:crypto';
import { mkdir, open, readdir, readFile, rename } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { promisify } from 'node:util';
import { gunzip } from 'node:zlib';
import type { ArchiveBatch, ArchiveEntry } from '../../contract/archive-sink';
import type { StepRecord } from '../../contract/checkpoint-store';
import { CheckpointCorruptedError } from '../../contract/errors';
import { ObjectArchiveSink, reviveStep } from './archive-objects';

const gunzipAsync = promisify(gunzip);
const LEGACY_KEY = 'legacy';

/**
 * Built-in sink on the local disk: the layout of `ObjectArchiveSink` as files under `directory`
 * (`runs/<run id>/manifest.json` and one `.json.gz` per batch), each written to a temporary file, fsynced
 * and renamed into place, so a crash never leaves half an object. Files an earlier release wrote
 * (`<directory>/<run id>.jsonl.gz`, one JSON row per line) are still listed and restored, as `legacy`
 * entries (their rows only: that release did not archive the run row).
 *
 * @example
 * const waypoint = await Waypoint.create({ retention: { keepLast: 10, archive: new GzipFileArchiveSink('./archive') } });
 */
export class GzipFileArchiveSink extends ObjectArchiveSink {
  readonly where: string;

  constructor(readonly directory: string) {
    super();
    this.where = `directory ${directory}`;
  }

  /** The single file an earlier release appended a run's rows to. */
  fileFor(runId: string): string {
    return join(this.directory, `${encodeURIComponent(runId)}.jsonl.gz`);
  }

  override async entries(runId: string): Promise<ArchiveEntry[]> {
    const legacy = await this.guard('read a legacy archive file', runId, () => readIfPresent(this.fileFor(runId)));
    const current = await super.entries(runId);
    if (legacy === null) return current;
    const rows = await legacyRows(runId, legacy);
    const last = rows[rows.length - 1];
    const entry: ArchiveEntry = {
      runId,
      key: LEGACY_KEY,
      kind: 'legacy',
      fromSequence: rows[0]?.sequence ?? 0,
      toSequence: last?.sequence ?? 0,
      rows: rows.length,
      lastDigest: last?.sha256 ?? '',
      bytes: legacy.length,
      sha256: createHash('sha256').update(legacy).digest('hex'),
      archivedAt: new Date(0),
    };
    return [entry, ...current];
  }

  override async read(entry: ArchiveEntry): Promise<ArchiveBatch> {
    if (entry.kind !== 'legacy') return super.read(entry);
    const bytes = await this.guard('read a legacy archive file', entry.runId, () => readIfPresent(this.fileFor(entry.runId)));
    if (bytes === null || createHash('sha256').update(bytes).digest('hex') !== entry.sha256) {
      throw new CheckpointCorruptedError(entry.runId, entry.fromSequence, `legacy archive file ${this.fileFor(entry.runId)} changed or vanished after it was listed`);
    }
    return { runId: entry.runId, kind: 'compaction', steps: await legacyRows(entry.runId, bytes) };
  }

  protected async putObject(path: string, body: Buffer): Promise<void> {
    const target = join(this.directory, path);
    await mkdir(dirname(target), { recursive: true });
    const temporary = `${target}.${randomBytes(6).toString('hex')}.tmp`;
    const file = await open(temporary, 'w');
    try {
      await file.write(body);
      await file.sync();
    } finally {
      await file.close();
    }
    await rename(temporary, target);
    // The rename itself is durable only once its directory is synced.
    const folder = await open(dirname(target), 'r');
    try {
      await folder.sync();
    } finally {
      await folder.close();
    }
  }

  protected getObject(path: string): Promise<Buffer | null> {
    return readIfPresent(join(this.directory, path));
  }

  protected async listRunFolders(): Promise<string[]> {
    const folders = await readdirIfPresent(join(this.directory, 'runs'));
    const legacy = (await readdirIfPresent(this.directory)).filter((name) => name.endsWith('.jsonl.gz')).map((name) => name.slice(0, -'.jsonl.gz'.length));
    // A legacy file name is encodeURIComponent of the id; a folder also encodes dots: both decode the same.
    return [...new Set([...folders, ...legacy].map((name) => encodeURIComponent(decodeURIComponent(name))))];
  }
}

/** The rows of a legacy file: concatenated gzip members of JSON lines, retried appends included. */
async function legacyRows(runId: string, bytes: Buffer): Promise<StepRecord[]> {
  try {
    const lines = (await gunzipAsync(bytes))
      .toString('utf8')
      .split('\n')
      .filter((line) => line.trim() !== '');
    return lines.map((line) => reviveStep(JSON.parse(line) as StepRecord));
  } catch (error) {
    throw new CheckpointCorruptedError(runId, 0, `legacy archive file of the run cannot be decoded (${(error as Error).message})`);
  }
}

async function readIfPresent(path: string): Promise<Buffer | null> {
  try {
    return await readFile(path);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return null;
    throw error;
  }
}

async function readdirIfPresent(path: string): Promise<string[]> {
  try {
    return await readdir(path);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return [];
    throw error;
  }
}
