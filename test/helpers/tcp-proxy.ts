import { createServer, Socket, type Server } from 'node:net';

/**
 * A TCP proxy of the test's own in front of a shared server (PostgreSQL, Redis), so a test can make that
 * server unreachable for its own clients only, without stopping the machine's server.
 *
 * - `cut()`: every open connection is reset and new ones are refused (accepted and reset at once), so
 *   clients see the outage immediately; the port stays bound, so nothing else can take it meanwhile.
 * - `freeze()`: connections stay open but nothing is forwarded any more: a server that hangs.
 * - `restore()`: forwards new connections again (clients reconnect by themselves).
 *
 * @example
 * const proxy = await TcpProxy.start({ port: 6379 });
 * const store = new RedisCheckpointStore({ url: `redis://127.0.0.1:${proxy.port}` });
 * proxy.cut();      // Redis is "down" for this store
 * proxy.restore();  // and back
 * await proxy.close();
 */
export class TcpProxy {
  private readonly sockets = new Set<Socket>();
  private refusing = false;
  private frozen = false;
  /** Connections accepted and forwarded so far (not counting refused ones). */
  connections = 0;

  private constructor(
    private readonly server: Server,
    private readonly target: { host: string; port: number },
  ) {}

  /** Listens on `listenPort` (default: any free port) on 127.0.0.1 and forwards to `target`. */
  static async start(target: { host?: string; port: number }, listenPort = 0): Promise<TcpProxy> {
    let proxy: TcpProxy | undefined;
    const server = createServer((client) => proxy!.accept(client));
    proxy = new TcpProxy(server, { host: target.host ?? '127.0.0.1', port: target.port });
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(listenPort, '127.0.0.1', () => (server.off('error', reject), resolve()));
    });
    return proxy;
  }

  get port(): number {
    return (this.server.address() as { port: number }).port;
  }

  /** `redis://127.0.0.1:<port>` or `postgres://user@127.0.0.1:<port>/db`, pointing through the proxy. */
  url(scheme: 'redis' | 'postgres', path = ''): string {
    return scheme === 'redis' ? `redis://127.0.0.1:${this.port}${path}` : `postgres://postgres@127.0.0.1:${this.port}${path || '/test'}`;
  }

  /** Resets every open connection and refuses new ones until `restore()`. */
  cut(): void {
    this.refusing = true;
    for (const socket of this.sockets) hangUp(socket);
    this.sockets.clear();
  }

  /** Keeps connections open but stops forwarding bytes (a hung server, from the client's side). */
  freeze(): void {
    this.frozen = true;
    for (const socket of this.sockets) socket.pause();
  }

  /** Forwards again: new connections reach the target. Connections cut earlier stay cut. */
  restore(): void {
    this.refusing = false;
    if (this.frozen) {
      this.frozen = false;
      for (const socket of this.sockets) socket.resume();
    }
  }

  /** Resets every connection and stops listening. */
  async close(): Promise<void> {
    this.cut();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }

  private accept(client: Socket): void {
    client.on('error', () => {});
    if (this.refusing) {
      hangUp(client);
      return;
    }
    this.connections += 1;
    const upstream = new Socket();
    upstream.on('error', () => {});
    for (const socket of [client, upstream]) {
      this.sockets.add(socket);
      // Either side closing ends the pair, as a real connection would.
      socket.on('close', () => {
        this.sockets.delete(socket);
        (socket === client ? upstream : client).destroy();
      });
    }
    upstream.connect(this.target.port, this.target.host);
    client.pipe(upstream).pipe(client);
    if (this.frozen) {
      client.pause();
      upstream.pause();
    }
  }
}

/**
 * Resets a connection (RST, as a crashed server or a dropped network path looks to a client). A socket
 * already half-closed is only destroyed: resetting one in that state spins the event loop on Node 20.
 */
function hangUp(socket: Socket): void {
  if (socket.readyState === 'open' && !socket.destroyed) socket.resetAndDestroy();
  else socket.destroy();
}
