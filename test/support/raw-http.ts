import { connect } from 'node:net';

/** Sends raw bytes and returns the raw response: for what no HTTP client would send. */
export function rawRequest(url: string, bytes: string): Promise<{ status: number; headers: string; body: string }> {
  const { hostname, port } = new URL(url);
  return new Promise((resolve, reject) => {
    const socket = connect(Number(port), hostname, () => socket.write(bytes));
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
