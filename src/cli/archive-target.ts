import type { ArchiveSink } from '../contract/archive-sink';
import { GzipFileArchiveSink } from '../core/history/gzip-file-archive';
import { usageError } from './exit-codes';

/**
 * The sink an `--archive` value names: a directory (`./archive`, gzip files), or
 * `s3://bucket/prefix` with optional `?endpoint=http://127.0.0.1:9000&region=eu-west-1&pathStyle=1&storageClass=GLACIER_IR`
 * (credentials from the AWS SDK's usual sources: AWS_ACCESS_KEY_ID, profiles, roles).
 *
 * @example
 * const sink = await archiveSinkFor('s3://agent-runs/waypoint/prod?storageClass=GLACIER_IR');
 */
export function archiveSinkFor(spec: string): ArchiveSink {
  if (!spec.startsWith('s3://')) return new GzipFileArchiveSink(spec);
  let url: URL;
  try {
    url = new URL(spec);
  } catch (error) {
    throw usageError(`--archive ${spec} is not a valid s3:// URL. Write it as s3://bucket/prefix?endpoint=<url>&region=<region>.`, error);
  }
  const known = new Set(['endpoint', 'region', 'pathStyle', 'storageClass']);
  for (const name of url.searchParams.keys()) if (!known.has(name)) throw usageError(`--archive ${spec}: unknown parameter '${name}' (known: ${[...known].join(', ')}).`);
  if (!url.hostname) throw usageError(`--archive ${spec} names no bucket: write s3://bucket/prefix.`);
  // eslint-disable-next-line @typescript-eslint/no-require-imports -- loaded only for an s3:// archive, like the command modules (program.ts)
  const { S3ArchiveSink } = require('../integrations/s3/s3-archive-sink') as typeof import('../integrations/s3/s3-archive-sink');
  const pathStyle = url.searchParams.get('pathStyle');
  return new S3ArchiveSink({
    bucket: url.hostname,
    prefix: decodeURIComponent(url.pathname.replace(/^\//, '')),
    endpoint: url.searchParams.get('endpoint') ?? process.env.AWS_ENDPOINT_URL_S3 ?? process.env.AWS_ENDPOINT_URL ?? undefined,
    region: url.searchParams.get('region') ?? undefined,
    forcePathStyle: pathStyle === null ? undefined : pathStyle === '1' || pathStyle === 'true',
    storageClass: (url.searchParams.get('storageClass') ?? undefined) as import('../integrations/s3/s3-archive-sink').S3StorageClass | undefined,
  });
}
