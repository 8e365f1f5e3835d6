import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Server } from 'node:http';
import { CreateBucketCommand, S3Client } from '@aws-sdk/client-s3';

interface S3rverInstance {
  run(): Promise<{ address: string; port: number }>;
  close(): Promise<void>;
}
type S3rverClass = new (options: { address: string; port: number; silent: boolean; directory: string }) => S3rverInstance;
// eslint-disable-next-line @typescript-eslint/no-require-imports -- s3rver ships no types; its constructor is typed above
const S3rver = require('s3rver') as S3rverClass;

/**
 * A real S3-compatible server (s3rver, an npm package) on 127.0.0.1, its data in a temp directory of its
 * own, for tests that need S3 without the cloud (never a mock of the client). `stop` and `start` keep the
 * port and the data, so a test can take the server away mid-operation and bring it back.
 *
 * s3rver (2021) predates the SDK's default flexible checksums, yet the sink's requests pass with the SDK's
 * defaults (its bodies are Buffers of known length, sent with a checksum header, not aws-chunked), so the
 * clients here keep them: the tests run what users run. It does not know `GLACIER_IR` (a 2021 list of
 * storage classes), so the tests use `STANDARD_IA`.
 */
export class S3TestServer {
  readonly directory = mkdtempSync(join(tmpdir(), 'wp-s3rver-'));
  port = 0;
  private server: S3rverInstance | undefined;

  get endpoint(): string {
    return `http://127.0.0.1:${this.port}`;
  }

  /**
   * Listens on the port of the last start, or first on a free port below the kernel's ephemeral range
   * (32768+): a port from that range, once released by `stop`, can be taken by any outgoing connection
   * of the process (PostgreSQL's, the SDK's) before the server listens on it again.
   */
  async start(): Promise<void> {
    if (this.server) return;
    for (let attempt = 0; ; attempt++) {
      const port = this.port || 20_000 + Math.floor(Math.random() * 12_000);
      try {
        await listen(new S3rver({ address: '127.0.0.1', port, silent: true, directory: this.directory }), (server) => (this.server = server));
        this.port = port;
        return;
      } catch (error) {
        if ((error as NodeJS.ErrnoException).code !== 'EADDRINUSE' || this.port !== 0 || attempt >= 20) throw error;
      }
    }
  }

  async stop(): Promise<void> {
    const server = this.server;
    this.server = undefined;
    await server?.close();
  }

  /** Client settings for this server: path-style, its fixed credentials, one attempt (an outage fails at once). */
  clientConfig() {
    return {
      endpoint: this.endpoint,
      region: 'us-east-1',
      forcePathStyle: true,
      credentials: { accessKeyId: 'S3RVER', secretAccessKey: 'S3RVER' },
      maxAttempts: 1,
    };
  }

  client(): S3Client {
    return new S3Client(this.clientConfig());
  }

  async createBucket(name: string): Promise<void> {
    const client = this.client();
    try {
      await client.send(new CreateBucketCommand({ Bucket: name }));
    } finally {
      client.destroy();
    }
  }

  async dispose(): Promise<void> {
    await this.stop();
    rmSync(this.directory, { recursive: true, force: true });
  }
}

/**
 * `server.run()`, with a listen error rejecting: s3rver passes `listen` a callback that never gets the
 * error, which Node emits as an 'error' event instead (an uncaught exception). Its own `listen` hook is
 * given one that settles either way.
 */
async function listen(server: S3rverInstance, started: (server: S3rverInstance) => void): Promise<void> {
  const hooked = server as S3rverInstance & { listen(...args: unknown[]): unknown };
  const original = hooked.listen.bind(hooked);
  hooked.listen = (...args: unknown[]) =>
    new Promise<Server>((resolve, reject) => {
      const http = original(...args, () => resolve(http)) as Server;
      http.once('error', reject);
    });
  await server.run();
  started(server);
}
