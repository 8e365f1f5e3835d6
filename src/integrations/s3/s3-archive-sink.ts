import type { S3Client, S3ClientConfig } from '@aws-sdk/client-s3';
import { WaypointError } from '../../contract/waypoint-error';
import { ObjectArchiveSink } from '../../core/history/archive-objects';

type ClientS3 = typeof import('@aws-sdk/client-s3');

/** S3 storage classes an archive object may be written in (what the SDK's `StorageClass` accepts). */
export type S3StorageClass =
  'STANDARD' | 'STANDARD_IA' | 'ONEZONE_IA' | 'INTELLIGENT_TIERING' | 'GLACIER_IR' | 'GLACIER' | 'DEEP_ARCHIVE' | 'REDUCED_REDUNDANCY' | 'EXPRESS_ONEZONE' | 'OUTPOSTS';

export interface S3ArchiveSinkOptions {
  /** The bucket; it must exist (the sink never creates or configures buckets). */
  bucket: string;
  /** Key prefix of every object (`waypoint/prod/`); a missing trailing `/` is added. Default: none. */
  prefix?: string;
  /** Your `S3Client` (its region, credentials, retries). Without it the sink builds one from the fields below. */
  client?: S3Client;
  /** Endpoint of an S3-compatible service (MinIO, R2, Ceph, ...). Default: AWS's, from the region. */
  endpoint?: string;
  /** Default: the SDK's (AWS_REGION), else `us-east-1`. */
  region?: string;
  /** Default: the SDK's provider chain (environment, profile, instance role). */
  credentials?: { accessKeyId: string; secretAccessKey: string; sessionToken?: string };
  /** Path-style addressing (`endpoint/bucket/key`), which most S3-compatible services need. Default false. */
  forcePathStyle?: boolean;
  /** Further `S3Client` settings when the sink builds the client (e.g. `requestChecksumCalculation: 'WHEN_REQUIRED'` for old servers). */
  clientConfig?: Partial<S3ClientConfig>;
  /**
   * Storage class of the batch objects (`GLACIER_IR`, `STANDARD_IA`, ...). Default: the bucket's default
   * (`STANDARD`). Use a class that reads back without a restore request (`GLACIER_IR`, `*_IA`): objects in
   * `GLACIER` or `DEEP_ARCHIVE` must be restored in S3 before `retention.restore` can read them. The small,
   * often rewritten per-run manifest is always `STANDARD`.
   */
  storageClass?: S3StorageClass;
  /** Server-side encryption of every object: `AES256` or `aws:kms` (with `kmsKeyId`). Default: the bucket's. */
  serverSideEncryption?: 'AES256' | 'aws:kms' | 'aws:kms:dsse';
  kmsKeyId?: string;
}

/**
 * Archives retention's folded and pruned rows to S3 or any S3-compatible service, and reads them back
 * for `waypoint.retention.restore(runId)`. `@aws-sdk/client-s3` is an optional peer dependency, loaded on
 * first use. Objects are laid out per run (see `ObjectArchiveSink`):
 * `<prefix>runs/<run id>/manifest.json` and one gzip JSON object per batch, named from its content, so a
 * run is found from its id without listing the bucket and a retried prune writes no second copy. Payloads
 * stay as the store sealed them (encrypted when `encryption` is configured).
 *
 * @example
 * import { S3ArchiveSink } from 'waypoint-durable/s3';
 * const archive = new S3ArchiveSink({ bucket: 'agent-runs', prefix: 'waypoint/prod/', storageClass: 'GLACIER_IR' });
 * const waypoint = await Waypoint.create({ retention: { keepLast: 20, compactEvery: 200, archive } });
 */
export class S3ArchiveSink extends ObjectArchiveSink {
  readonly where: string;
  readonly bucket: string;
  readonly prefix: string;
  private client: S3Client | undefined;
  private sdk: Promise<ClientS3> | undefined;
  /** The client is ours to destroy only when we built it. */
  private readonly ownsClient: boolean;

  constructor(private readonly options: S3ArchiveSinkOptions) {
    super();
    if (typeof options.bucket !== 'string' || options.bucket === '')
      throw new WaypointError('INVALID_OPTIONS', 'S3ArchiveSink needs a bucket: new S3ArchiveSink({ bucket: "my-bucket" }).');
    const prefix = options.prefix ?? '';
    this.prefix = prefix === '' || prefix.endsWith('/') ? prefix : `${prefix}/`;
    this.bucket = options.bucket;
    this.client = options.client;
    this.ownsClient = options.client === undefined;
    this.where = `s3://${this.bucket}/${this.prefix}`;
  }

  /** Destroys the client the sink built (a client you passed is left to you). */
  close(): void {
    if (this.ownsClient) this.client?.destroy();
    this.client = undefined;
  }

  protected async putObject(path: string, body: Buffer, role: 'batch' | 'manifest'): Promise<void> {
    const { client, sdk } = await this.connect();
    await client.send(
      new sdk.PutObjectCommand({
        Bucket: this.bucket,
        Key: this.prefix + path,
        Body: body,
        ContentLength: body.length,
        ContentType: role === 'manifest' ? 'application/json' : 'application/gzip',
        StorageClass: role === 'batch' ? this.options.storageClass : undefined,
        ServerSideEncryption: this.options.serverSideEncryption,
        SSEKMSKeyId: this.options.kmsKeyId,
      }),
    );
  }

  protected async getObject(path: string): Promise<Buffer | null> {
    const { client, sdk } = await this.connect();
    try {
      const out = await client.send(new sdk.GetObjectCommand({ Bucket: this.bucket, Key: this.prefix + path }));
      if (!out.Body) return Buffer.alloc(0);
      return Buffer.from(await out.Body.transformToByteArray());
    } catch (error) {
      const e = error as { name?: string; $metadata?: { httpStatusCode?: number } };
      if (e.name === 'NoSuchKey' || e.name === 'NotFound' || e.$metadata?.httpStatusCode === 404) return null;
      throw error;
    }
  }

  protected async listRunFolders(): Promise<string[]> {
    const { client, sdk } = await this.connect();
    const root = `${this.prefix}runs/`;
    const folders: string[] = [];
    let token: string | undefined;
    do {
      const page = await client.send(new sdk.ListObjectsV2Command({ Bucket: this.bucket, Prefix: root, Delimiter: '/', ContinuationToken: token }));
      for (const common of page.CommonPrefixes ?? []) if (common.Prefix) folders.push(common.Prefix.slice(root.length, -1));
      token = page.IsTruncated ? page.NextContinuationToken : undefined;
    } while (token);
    return folders;
  }

  /** The SDK, loaded on first use, and the client (the caller's, or one built from the options). */
  private async connect(): Promise<{ client: S3Client; sdk: ClientS3 }> {
    const sdk = await (this.sdk ??= loadClientS3());
    if (!this.client) {
      const { endpoint, region, credentials, forcePathStyle, clientConfig } = this.options;
      this.client = new sdk.S3Client({ region: region ?? process.env.AWS_REGION ?? 'us-east-1', endpoint, credentials, forcePathStyle, ...clientConfig });
    }
    return { client: this.client, sdk };
  }
}

/** `@aws-sdk/client-s3`, or `MISSING_DEPENDENCY` saying to install it. */
async function loadClientS3(): Promise<ClientS3> {
  try {
    return await import('@aws-sdk/client-s3');
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    if (code === 'ERR_MODULE_NOT_FOUND' || code === 'MODULE_NOT_FOUND') {
      throw new WaypointError(
        'MISSING_DEPENDENCY',
        "The '@aws-sdk/client-s3' package is not installed; S3ArchiveSink (waypoint-durable/s3) needs it. Install it next to Waypoint (npm install @aws-sdk/client-s3).",
        { cause: error },
      );
    }
    throw error;
  }
}
