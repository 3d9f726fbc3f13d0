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
