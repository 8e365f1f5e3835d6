import { startUiServer } from '../../ui/index';
import { EXIT, type ExitCode } from '../exit-codes';
import type { CliIo } from '../output';
import { openSession, type GlobalOptions } from '../session';

export interface UiCliOptions {
  port?: string;
  host?: string;
  token?: string;
  allowActions?: boolean;
}

/**
 * `waypoint-durable ui`: serves the run timeline page for the store until SIGINT / SIGTERM. Binds 127.0.0.1
 * unless told otherwise (another address needs a token); resume / cancel / fork only with --allow-actions.
 */
export async function ui(globals: GlobalOptions, options: UiCliOptions, io: CliIo): Promise<ExitCode> {
  const port = options.port === undefined ? 4317 : Number(options.port);
  if (!Number.isInteger(port) || port < 0 || port > 65_535) {
    io.err(`waypoint: --port must be a TCP port number (0-65535), got '${options.port}'.\n`);
    return EXIT.USAGE;
  }
  const session = await openSession(globals, io, { command: 'ui' });
  try {
    const server = await startUiServer({
      store: session.waypoint.store,
      waypoint: session.waypoint,
      port,
      host: options.host ?? '127.0.0.1',
      token: options.token,
      allowActions: options.allowActions === true,
      pipelines: [...session.plans.values()].map((plan) => plan.pipeline),
      hmacKey: session.integrity.hmacKey,
    });
    io.out(`Waypoint UI for ${session.storeDisplay} at ${server.url}${options.allowActions ? ' (actions enabled)' : ''}; Ctrl-C stops it.\n`);
    await new Promise<void>((resolve) => {
      const stop = () => {
        process.removeListener('SIGINT', stop);
        process.removeListener('SIGTERM', stop);
        resolve();
      };
      process.once('SIGINT', stop);
      process.once('SIGTERM', stop);
    });
    await server.close();
    return EXIT.OK;
  } finally {
    await session.close();
  }
}
