/**
 * A webhook receiver on raw sockets on 127.0.0.1, for answers node:http will not give: interim
 * (1xx) statuses, bodies cut short by a reset or framed wrongly, `Keep-Alive` hints. Each request
 * read (its head and Content-Length body) is counted and answered by `answer` writing to the
 * socket whatever bytes it likes; the sockets open are counted too.
 */
import { AddressInfo, createServer, Server, Socket } from 'node:net';

export class RawReceiver {
  /** Requests read so far (the POSTs of every attempt). */
  posts = 0;
  private readonly sockets = new Set<Socket>();
  private server?: Server;

  constructor(private readonly answer: (socket: Socket) => void) {}

  /** Connections the client still holds open. */
  get open(): number {
    return this.sockets.size;
  }

  /** Listens on a free port; returns the URL to register. */
  async start(): Promise<string> {
    this.server = createServer((socket) => {
      this.sockets.add(socket);
      socket.on('error', () => undefined);
      socket.on('close', () => this.sockets.delete(socket));
      let buffered = Buffer.alloc(0);
      socket.on('data', (data: Buffer) => {
        buffered = Buffer.concat([buffered, data]);
        for (;;) {
          const headEnd = buffered.indexOf('\r\n\r\n');
          if (headEnd < 0) return;
          const length = Number(/content-length:\s*(\d+)/i.exec(buffered.subarray(0, headEnd).toString('latin1'))?.[1] ?? 0);
          if (buffered.length < headEnd + 4 + length) return;
          buffered = buffered.subarray(headEnd + 4 + length);
          this.posts++;
          this.answer(socket);
        }
      });
    });
    await new Promise<void>((resolve) => this.server!.listen(0, '127.0.0.1', resolve));
    return `http://127.0.0.1:${(this.server.address() as AddressInfo).port}/hook`;
  }

  async stop(): Promise<void> {
    for (const socket of this.sockets) socket.destroy();
    await new Promise((resolve) => this.server?.close(resolve));
  }
}
