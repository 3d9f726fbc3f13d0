/**
 * A TCP forwarder the tests can cut and restore, to take a real dependency (PostgreSQL, Redis)
 * away from a running service without touching the shared servers.
 */
import net from 'node:net';

export class TcpProxy {
  private server?: net.Server;
  private readonly sockets = new Set<net.Socket>();
  private readonly pairs = new Set<[net.Socket, net.Socket]>();
  private silent = false;
  /** What new connections send reaches the target this much later (ms). */
  delayMs = 0;
  port = 0;

  constructor(
    private readonly targetHost: string,
    private readonly targetPort: number,
  ) {}

  async start(): Promise<this> {
    const server = net.createServer((client) => {
      if (this.silent) {
        this.sockets.add(client);
        client.on('error', () => undefined);
        client.pause();
        return;
      }
      const upstream = net.connect(this.targetPort, this.targetHost);
      for (const s of [client, upstream]) {
        this.sockets.add(s);
        s.on('error', () => undefined);
        s.on('close', () => {
          this.sockets.delete(s);
          client.destroy();
          upstream.destroy();
        });
      }
      const pair: [net.Socket, net.Socket] = [client, upstream];
      this.pairs.add(pair);
      client.on('close', () => this.pairs.delete(pair));
      upstream.pipe(client);
      const delay = this.delayMs;
      if (delay > 0) client.on('data', (chunk) => setTimeout(() => upstream.write(chunk), delay));
      else client.pipe(upstream);
    });
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(this.port, '127.0.0.1', () => resolve());
    });
    this.port = (server.address() as net.AddressInfo).port;
    this.server = server;
    return this;
  }

  /** Refuses new connections and cuts every open one. */
  async cut(): Promise<void> {
    const server = this.server;
    this.server = undefined;
    for (const s of this.sockets) s.destroy();
    this.sockets.clear();
    if (server) await new Promise<void>((resolve) => server.close(() => resolve()));
  }

  /**
   * The open connections go silent and stay open (a server that hangs, or a network that
   * drops packets without a reset): nothing more is forwarded either way. New ones work.
   */
  stall(): void {
    for (const [client, upstream] of this.pairs) {
      client.unpipe(upstream);
      upstream.unpipe(client);
      client.pause();
      upstream.pause();
    }
    this.pairs.clear();
  }

  /**
   * Nothing answers any more, yet nothing is refused: the open connections go silent (as with
   * stall()) and new ones are accepted and never answered, as a proxy or load balancer in front
   * of a server that is gone does. stop() ends them.
   */
  blackhole(): void {
    this.stall();
    this.silent = true;
  }

  /** Listens again on the same port. */
  async restore(): Promise<void> {
    this.silent = false;
    await this.start();
  }

  async stop(): Promise<void> {
    await this.cut();
  }
}
