import { connect, Socket } from 'node:net';

/**
 * Sends raw bytes and returns the raw response: for what no HTTP client would send. `halfClose`
 * ends the sending side with the bytes (a FIN right after the request), and still reads the answer.
 */
export function rawRequest(url: string, bytes: string, { halfClose = false } = {}): Promise<RawResponse> {
  return exchange(url, (socket) => (halfClose ? socket.end(bytes) : socket.write(bytes)));
}

/**
 * Sends `head` at once, then `body` one byte every `everyMs` (and nothing once it is all sent),
 * until the server answers and closes: a client on a very slow link, or one holding a connection.
 */
export function trickleRequest(url: string, head: string, body: string, everyMs = 50): Promise<RawResponse> {
  let sent = 0;
  let timer: NodeJS.Timeout | undefined;
  const answer = exchange(url, (socket) => {
    socket.write(head);
    timer = setInterval(() => {
      if (sent < body.length && socket.writable) socket.write(body[sent++]);
    }, everyMs);
  });
  return answer.finally(() => clearInterval(timer));
}

/** Runs `send` on a new connection and resolves with the first response, once it is whole or the connection closes. */
function exchange(url: string, send: (socket: Socket) => void): Promise<RawResponse> {
  const { hostname, port } = new URL(url);
  return new Promise((resolve, reject) => {
    const socket = connect(Number(port), hostname, () => send(socket));
    let data = '';
    socket.setEncoding('latin1');
    socket.on('data', (chunk) => {
      data += chunk;
      const end = data.indexOf('\r\n\r\n');
      const length = /content-length: *(\d+)/i.exec(data.slice(0, end));
      if (end >= 0 && length && data.length >= end + 4 + Number(length[1])) socket.destroy();
    });
    socket.on('close', () => {
      const end = data.indexOf('\r\n\r\n');
      resolve({ status: Number(data.slice(9, 12)), headers: data.slice(0, end), body: data.slice(end + 4) });
    });
    socket.on('error', reject);
  });
}

export interface RawResponse {
  status: number;
  headers: string;
  body: string;
}

/**
 * Keeps `depth` copies of one request pipelined on a kept-alive connection, sending another as
 * each answer arrives, until the server closes the connection: `answers` so far, and `closed`
 * with all of them.
 */
export function pipelineUntilClosed(url: string, bytes: string, depth = 2): { answers: RawResponse[]; closed: Promise<RawResponse[]> } {
  const { hostname, port } = new URL(url);
  const answers: RawResponse[] = [];
  const closed = new Promise<RawResponse[]>((resolve) => {
    const socket = connect(Number(port), hostname, () => socket.write(bytes.repeat(depth)));
    let data = '';
    socket.setEncoding('latin1');
    socket.on('data', (chunk) => {
      data += chunk;
      for (let end = data.indexOf('\r\n\r\n'); end >= 0; end = data.indexOf('\r\n\r\n')) {
        const headers = data.slice(0, end);
        const length = Number(/content-length: *(\d+)/i.exec(headers)?.[1] ?? 0);
        if (data.length < end + 4 + length) break;
        answers.push({ status: Number(headers.slice(9, 12)), headers, body: data.slice(end + 4, end + 4 + length) });
        data = data.slice(end + 4 + length);
        if (socket.writable && !/\r\nconnection: *close/i.test(headers)) socket.write(bytes);
      }
    });
    socket.on('error', () => undefined);
    socket.on('close', () => resolve(answers));
  });
  return { answers, closed };
}

/**
 * Sends `head` (which carries `Expect: 100-continue`) and sends `body` only once the server
 * answers 100 Continue, as curl does: whether a 100 came, and the final response.
 */
export function expectContinue(url: string, head: string, body: string): Promise<RawResponse & { continued: boolean }> {
  let continued = false;
  return exchange(url, (socket) => {
    socket.write(head);
    let seen = '';
    const interim = (chunk: string) => {
      seen += chunk;
      if (!seen.includes('\r\n\r\n')) return;
      socket.off('data', interim);
      if (seen.startsWith('HTTP/1.1 100 ')) {
        continued = true;
        socket.write(body);
      }
    };
    socket.on('data', interim);
  }).then((res) => (continued ? { ...continuedOnly(res), continued } : { ...res, continued }));
}

/** The final response of an exchange that began with a 100 Continue. */
function continuedOnly(res: RawResponse): RawResponse {
  const whole = `${res.headers}\r\n\r\n${res.body}`;
  const final = whole.slice(whole.indexOf('\r\n\r\n') + 4);
  const end = final.indexOf('\r\n\r\n');
  return { status: Number(final.slice(9, 12)), headers: final.slice(0, end), body: final.slice(end + 4) };
}
