/**
 * `waypoint-durable/s3`: retention's archive on S3 or any S3-compatible service. `@aws-sdk/client-s3` (an
 * optional peer) loads on the sink's first archive read or write, not when this module is imported.
 *
 * @example
 * import { S3ArchiveSink } from 'waypoint-durable/s3';
 * const waypoint = await Waypoint.create({ retention: { archive: new S3ArchiveSink({ bucket: 'agent-runs', storageClass: 'GLACIER_IR' }) } });
 * await waypoint.retention.restore('q3-aapl');
 */
export { S3ArchiveSink, type S3ArchiveSinkOptions, type S3StorageClass } from './s3-archive-sink';
