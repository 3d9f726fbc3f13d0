import { once } from 'node:events';
import { createServer, Server, ServerResponse } from 'node:http';
import { AddressInfo, connect, Socket } from 'node:net';
import { Backlog, endWithin, STALLED_HEARTBEATS } from './stream-backlog';

describe('Backlog', () => {
  const beats = (backlog: Backlog, length: number, n: number) => Array.from({ length: n }, () => backlog.stalled(length));

  it('stalls after STALLED_HEARTBEATS heartbeats in which the client took nothing of what waited', () => {
    const backlog = new Backlog();
    backlog.before(0);
    backlog.after(1000);
    expect(beats(backlog, 1000, STALLED_HEARTBEATS)).toEqual([...Array(STALLED_HEARTBEATS - 1).fill(false), true]);
  });

  it('counts writes that only add to what waits as nothing taken', () => {
    const backlog = new Backlog();
    for (let n = 1; n <= STALLED_HEARTBEATS; n++) {
      backlog.before(n * 1000);
      backlog.after(n * 1000 + 500);
      expect(backlog.stalled(n * 1000 + 500)).toBe(n === STALLED_HEARTBEATS);
    }
  });

  it('does not stall a client that takes something, however little, or one with nothing waiting', () => {
    const slow = new Backlog();
    for (let n = 0; n < 3 * STALLED_HEARTBEATS; n++) {
      slow.after(5000 - n);
      expect(slow.stalled(5000 - n - 1)).toBe(false); // one byte taken per heartbeat
    }
    const idle = new Backlog();
    idle.after(0);
    expect(beats(idle, 0, 3 * STALLED_HEARTBEATS)).not.toContain(true);
  });

  it('starts counting again once the client takes something', () => {
    const backlog = new Backlog();
    backlog.after(1000);
    beats(backlog, 1000, STALLED_HEARTBEATS - 1);
    backlog.before(900); // read between two writes
    backlog.after(1900);
    expect(beats(backlog, 1900, STALLED_HEARTBEATS + 1)).toEqual([...Array(STALLED_HEARTBEATS).fill(false), true]);
  });
});

describe('endWithin', () => {
  let server: Server;
  let responses: ServerResponse[];
  const clients: Socket[] = [];

  beforeAll(async () => {
    responses = [];
    server = createServer((_req, res) => {
      res.writeHead(200, { 'Content-Type': 'text/event-stream' });
      res.write('retry: 3000\n\n');
      responses.push(res);
    });
    server.listen(0, '127.0.0.1');
    await once(server, 'listening');
  });
  afterAll(async () => {
    clients.forEach((c) => c.destroy());
    server.closeAllConnections();
    server.close();
  });

  /** A client that reads the headers, then nothing more; resolves with its socket and the server's response. */
  const stuckClient = async () => {
    const socket = connect((server.address() as AddressInfo).port, '127.0.0.1');
    clients.push(socket);
    socket.write('GET / HTTP/1.1\r\nHost: test\r\n\r\n');
    await once(socket, 'data');
    socket.pause();
    return { socket, res: responses.at(-1)! };
  };

  it('ends a stream whose client reads, politely', async () => {
    const socket = connect((server.address() as AddressInfo).port, '127.0.0.1');
    clients.push(socket);
    socket.write('GET / HTTP/1.1\r\nHost: test\r\n\r\n');
    let received = '';
    socket.on('data', (chunk) => (received += chunk.toString('latin1')));
    await once(socket, 'data');
    const res = responses.at(-1)!;
    res.write('data: x\n\n');
    endWithin(res, 60_000);
    await once(res, 'close');
    await new Promise<void>((resolve) => (received.endsWith('0\r\n\r\n') ? resolve() : socket.on('data', () => received.endsWith('0\r\n\r\n') && resolve())));
    expect(socket.destroyed).toBe(false); // the end was taken; the connection may be kept alive
  });

  it('cuts off a stream whose client does not take the end, so its buffers are freed', async () => {
    const { socket, res } = await stuckClient();
    // Until the kernel's buffers are full and the response's own holds what the client does not take.
    const chunk = 'data: ' + 'x'.repeat(256 * 1024) + '\n\n';
    while (res.writableLength < 2 * chunk.length) {
      res.write(chunk);
      await new Promise((resolve) => setImmediate(resolve));
    }
    endWithin(res, 0);
    await once(res, 'close');
    expect(res.socket?.destroyed ?? true).toBe(true);
    // The client sees the connection end once it reads again, without the response's last chunk.
    let received = '';
    socket.on('data', (c) => (received += c.toString('latin1')));
    socket.on('error', () => undefined);
    socket.resume();
    await once(socket, 'close');
    expect(received.endsWith('0\r\n\r\n')).toBe(false);
  });
});
