/**
 * A real webhook receiver on 127.0.0.1: records every request (raw body bytes as text, headers)
 * and answers with whatever `respond` says for it (a status, a status to come, `hang` to never
 * answer, or `unfinished`: 200 and a body that never ends).
 */
import { createServer, IncomingHttpHeaders, Server } from 'node:http';
import type { AddressInfo } from 'node:net';

export interface Received {
  path: string;
  headers: IncomingHttpHeaders;
  body: string;
}

export type Answer = number | Promise<number> | 'hang' | 'unfinished';

export class Receiver {
  readonly requests: Received[] = [];
  /** The most requests of one path that were open at the same time. */
  readonly maxOpen = new Map<string, number>();
  private readonly open = new Map<string, number>();
  respond: (req: Received, index: number) => Answer = () => 200;
  private server?: Server;

  async start(): Promise<string> {
    this.server = createServer((req, res) => {
      const path = req.url ?? '/';
      this.open.set(path, (this.open.get(path) ?? 0) + 1);
      this.maxOpen.set(path, Math.max(this.maxOpen.get(path) ?? 0, this.open.get(path)!));
      res.on('close', () => this.open.set(path, this.open.get(path)! - 1));
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        const received = { path, headers: req.headers, body: Buffer.concat(chunks).toString('utf8') };
        this.requests.push(received);
        const answer = this.respond(received, this.requests.length - 1);
        if (answer === 'hang') return;
        if (answer === 'unfinished') return void res.writeHead(200, { 'Content-Type': 'text/plain' }).write('still going');
        void Promise.resolve(answer).then((status) => {
          res.statusCode = status;
          res.end('ok');
        });
      });
    });
    await new Promise<void>((resolve) => this.server!.listen(0, '127.0.0.1', resolve));
    return `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
  }

  /** Requests for one path (each webhook gets a path of its own). */
  at(path: string): Received[] {
    return this.requests.filter((r) => r.path === path);
  }

  async stop(): Promise<void> {
    this.server?.closeAllConnections();
    await new Promise((resolve) => this.server?.close(resolve));
  }
}
