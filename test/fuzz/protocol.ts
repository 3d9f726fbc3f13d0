/**
 * Protocol-level abuse that no HTTP client library will send: requests written byte by byte
 * onto a TCP socket (no Host, NUL or bare CR in a header, obs-fold, Content-Length together
 * with Transfer-Encoding, bad chunk sizes, absolute-form and raw non-ASCII request targets,
 * unknown versions, CONNECT and Upgrade, too many headers, …). The README promises that the
 * HTTP layer answers each of these with the error envelope and an X-Request-Id; these requests
 * hold it to that. Sent by http.ts (sendRaw), replayed with nc by replay.ts.
 */
import fc from 'fast-check';
import { Fixtures } from './fixtures';
import type { FuzzRequest } from './requests';

type Build = (p: { method: string; target: string; host: string; auth: string }) => string | Buffer;

const line = (...lines: string[]) => lines.join('\r\n') + '\r\n\r\n';
const common = (host: string, auth: string) => [`Host: ${host}`, `Authorization: ${auth}`, 'Connection: close'];

/** Each case: a name (the class it reports under) and how to write it. */
export const PROTOCOL_CASES: Record<string, Build> = {
  'no Host (HTTP/1.1)': ({ method, target, auth }) => line(`${method} ${target} HTTP/1.1`, `Authorization: ${auth}`, 'Connection: close'),
  'HTTP/1.0 without Host (valid)': ({ method, target, auth }) => line(`${method} ${target} HTTP/1.0`, `Authorization: ${auth}`),
  'two Host headers': ({ method, target, host, auth }) => line(`${method} ${target} HTTP/1.1`, ...common(host, auth), 'Host: evil.example'),
  'hostile Host': ({ method, target, auth }) => line(`${method} ${target} HTTP/1.1`, 'Host: a b/../%00', `Authorization: ${auth}`, 'Connection: close'),
  'NUL in a header value': ({ method, target, host, auth }) => line(`${method} ${target} HTTP/1.1`, ...common(host, auth), 'X-Fuzz: a\u0000b'),
  'bare CR in a header value': ({ method, target, host, auth }) => line(`${method} ${target} HTTP/1.1`, ...common(host, auth), 'X-Fuzz: a\rb'),
  'LF-only line endings': ({ method, target, host, auth }) => [`${method} ${target} HTTP/1.1`, ...common(host, auth)].join('\n') + '\n\n',
  'obs-fold header continuation': ({ method, target, host, auth }) => line(`${method} ${target} HTTP/1.1`, ...common(host, auth), 'X-Fuzz: a', ' folded'),
  'header name with a space': ({ method, target, host, auth }) => line(`${method} ${target} HTTP/1.1`, ...common(host, auth), 'Bad Header: x'),
  'header line without a colon': ({ method, target, host, auth }) => line(`${method} ${target} HTTP/1.1`, ...common(host, auth), 'NoColonHere'),
  'non-ASCII header name': ({ method, target, host, auth }) => Buffer.concat([Buffer.from(`${method} ${target} HTTP/1.1\r\n${common(host, auth).join('\r\n')}\r\nX-`), Buffer.from([0xc3, 0x9c]), Buffer.from(': y\r\n\r\n')]),
  'DEL in a header value': ({ method, target, host, auth }) => line(`${method} ${target} HTTP/1.1`, ...common(host, auth), 'X-Fuzz: a\u007fb'),
  'two Authorization headers': ({ method, target, host, auth }) => line(`${method} ${target} HTTP/1.1`, ...common(host, auth), 'Authorization: Bearer svc_k1_forged'),
  'Content-Length and Transfer-Encoding': ({ target, host, auth }) => line(`POST ${target} HTTP/1.1`, ...common(host, auth), 'Content-Type: application/json', 'Content-Length: 5', 'Transfer-Encoding: chunked') + '0\r\n\r\n',
  'two different Content-Lengths': ({ target, host, auth }) => line(`POST ${target} HTTP/1.1`, ...common(host, auth), 'Content-Type: application/json', 'Content-Length: 2', 'Content-Length: 3') + '{}',
  'negative Content-Length': ({ target, host, auth }) => line(`POST ${target} HTTP/1.1`, ...common(host, auth), 'Content-Type: application/json', 'Content-Length: -1') + '{}',
  'non-numeric Content-Length': ({ target, host, auth }) => line(`POST ${target} HTTP/1.1`, ...common(host, auth), 'Content-Type: application/json', 'Content-Length: abc') + '{}',
  'bad chunk size': ({ target, host, auth }) => line(`POST ${target} HTTP/1.1`, ...common(host, auth), 'Content-Type: application/json', 'Transfer-Encoding: chunked') + 'zz\r\n{}\r\n0\r\n\r\n',
  'Transfer-Encoding: gzip, chunked': ({ target, host, auth }) => line(`POST ${target} HTTP/1.1`, ...common(host, auth), 'Content-Type: application/json', 'Transfer-Encoding: gzip, chunked') + '2\r\n{}\r\n0\r\n\r\n',
  'unknown Transfer-Encoding': ({ target, host, auth }) => line(`POST ${target} HTTP/1.1`, ...common(host, auth), 'Content-Type: application/json', 'Transfer-Encoding: fuzz') + '{}',
  'chunked body with a trailer': ({ target, host, auth }) => line(`POST ${target} HTTP/1.1`, ...common(host, auth), 'Content-Type: application/json', 'Transfer-Encoding: chunked') + '2\r\n{}\r\n0\r\nX-Trailer: \u0000\r\n\r\n',
  'unknown Expect': ({ method, target, host, auth }) => line(`${method} ${target} HTTP/1.1`, ...common(host, auth), 'Expect: fancy'),
  'HTTP/2.0 request line': ({ method, target, host, auth }) => line(`${method} ${target} HTTP/2.0`, ...common(host, auth)),
  'HTTP/9.9 request line': ({ method, target, host, auth }) => line(`${method} ${target} HTTP/9.9`, ...common(host, auth)),
  'junk after the version': ({ method, target, host, auth }) => line(`${method} ${target} HTTP/1.1 junk`, ...common(host, auth)),
  'absolute-form target': ({ method, target, host, auth }) => line(`${method} http://evil.example${target} HTTP/1.1`, ...common(host, auth)),
  'asterisk-form target': ({ host, auth }) => line('OPTIONS * HTTP/1.1', ...common(host, auth)),
  'raw space in the target': ({ method, target, host, auth }) => line(`${method} ${target}/a b HTTP/1.1`, ...common(host, auth)),
  'raw UTF-8 in the target': ({ method, target, host, auth }) => Buffer.concat([Buffer.from(`${method} ${target}/`), Buffer.from('é😀', 'utf8'), Buffer.from(` HTTP/1.1\r\n${common(host, auth).join('\r\n')}\r\n\r\n`)]),
  'raw control byte in the target': ({ method, target, host, auth }) => line(`${method} ${target}\u0001 HTTP/1.1`, ...common(host, auth)),
  'target without a leading slash': ({ method, target, host, auth }) => line(`${method} ${target.slice(1)} HTTP/1.1`, ...common(host, auth)),
  '3000 headers': ({ method, target, host, auth }) => line(`${method} ${target} HTTP/1.1`, ...common(host, auth), ...Array.from({ length: 3000 }, (_, i) => `X-H${i}: v`)),
  '20 kB header value': ({ method, target, host, auth }) => line(`${method} ${target} HTTP/1.1`, ...common(host, auth), `X-Big: ${'a'.repeat(20_000)}`),
  'CONNECT': ({ host, auth }) => line(`CONNECT ${host} HTTP/1.1`, ...common(host, auth)),
  'Upgrade: websocket': ({ target, host, auth }) => line(`GET ${target} HTTP/1.1`, `Host: ${host}`, `Authorization: ${auth}`, 'Connection: Upgrade', 'Upgrade: websocket', 'Sec-WebSocket-Version: 13', 'Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ=='),
  'HTTP/2 prior-knowledge preface': () => 'PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n',
  'garbage instead of a request': () => Buffer.from([0x16, 0x03, 0x01, 0x00, 0xa5, 0x01, 0x00, 0x00, 0xa1, 0x03, 0x03]), // a TLS ClientHello's start
};

/** Raw requests against a few ordinary targets, as tenant A's admin (credentials are not the point here). */
export function protocolArb(ops: Array<{ id: string; method: string; path: string }>, f: Fixtures, host: string, describe: (r: FuzzRequest) => FuzzRequest): fc.Arbitrary<FuzzRequest> {
  const targets: Array<[string, string]> = [
    ['GET /health', '/health'],
    ['GET /keys', '/keys'],
    ['GET /items/{id}', `/items/${f.a.itemIds[0]}`],
    ['POST /items', '/items'],
  ].filter(([id]) => ops.some((o) => o.id === id)) as Array<[string, string]>;
  return fc.record({ kind: fc.constantFrom(...Object.keys(PROTOCOL_CASES)), target: fc.constantFrom(...targets) }).map(({ kind, target: [route, target] }) => {
    const method = route.split(' ')[0];
    const built = PROTOCOL_CASES[kind]({ method, target, host, auth: `Bearer ${f.keys.adminA}` });
    const raw = typeof built === 'string' ? Buffer.from(built, 'latin1') : built;
    return describe({ persona: 'admin', method, route, labels: [`protocol: ${kind}`], path: target, query: '', headers: [], raw });
  });
}
