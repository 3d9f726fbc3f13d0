/**
 * Turns a failing request into something a person can re-run: a `curl` command line that
 * sends the same bytes (request line verbatim with --path-as-is and -g, every header, the body
 * with --data-binary from an ANSI-C quoted string, or from a file when it is large or holds NUL
 * bytes), with the service URL and the credential as shell variables that default to the
 * fuzz run's own values, followed by the response's status and body.
 */
import { createHash } from 'node:crypto';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { Fixtures } from './fixtures';
import { authorizationFor, FuzzResponse } from './http';
import { Finding } from './oracles';
import { FuzzRequest } from './requests';

/** Shell-quotes bytes: plain single quotes when printable ASCII, else $'…' with \xHH escapes. */
export function shellQuote(bytes: Buffer): string {
  const printable = bytes.every((b) => b >= 0x20 && b < 0x7f);
  if (printable) return `'${bytes.toString('latin1').replace(/'/g, `'\\''`)}'`;
  let out = "$'";
  for (const b of bytes) {
    if (b === 0x27) out += "\\'";
    else if (b === 0x5c) out += '\\\\';
    else if (b >= 0x20 && b < 0x7f) out += String.fromCharCode(b);
    else out += `\\x${b.toString(16).padStart(2, '0')}`;
  }
  return out + "'";
}

/** Header values go out as latin1 bytes (node's encoding for header strings). */
const q = (s: string) => shellQuote(Buffer.from(s, 'latin1'));

const PERSONA_NOTE: Record<FuzzRequest['persona'], string> = {
  admin: "tenant A's root admin key",
  member: "tenant A's member key (type_permissions core.note:write, fuzza.*:read; edge_permissions fuzza.links:read)",
  none: 'no credential',
  garbage: 'a garbage credential',
};

const INLINE_BODY_MAX = 4096;

/** Raw protocol cases: the bytes go to a file, replayed with nc (curl cannot send them). */
function rawCommand(r: FuzzRequest, f: Fixtures, outDir: string): string {
  const url = new URL(f.base);
  mkdirSync(outDir, { recursive: true });
  const file = join(outDir, `raw-${createHash('sha256').update(r.raw!).digest('hex').slice(0, 16)}.http`);
  writeFileSync(file, r.raw!);
  const shown = r.raw!.length > 600 ? `${shellQuote(r.raw!.subarray(0, 600))}…(${r.raw!.length} bytes)` : shellQuote(r.raw!);
  return [
    `# raw request (${r.labels.join(', ')}), as tenant A's root admin key; bytes: ${shown}`,
    `nc -q 3 ${url.hostname} ${url.port} < ${file}    # or: exec 3<>/dev/tcp/${url.hostname}/${url.port}; cat ${file} >&3; cat <&3`,
  ].join('\n');
}

/** A request target with long runs of one character written as a printf, to keep the line readable. */
function targetArg(target: string): string {
  const runs = target.match(/([A-Za-z0-9])\1{199,}/g) ?? [];
  let out = '"$SVC"';
  let rest = target;
  for (const run of runs) {
    const i = rest.indexOf(run);
    if (i > 0) out += q(rest.slice(0, i));
    out += `"$(printf '%*s' ${run.length} '' | tr ' ' '${run[0]}')"`;
    rest = rest.slice(i + run.length);
  }
  if (rest) out += q(rest);
  return out;
}

export function curlCommand(r: FuzzRequest, f: Fixtures, outDir: string): string {
  if (r.raw) return rawCommand(r, f, outDir);
  const lines: string[] = [];
  const auth = authorizationFor(r, f);
  const usesKey = r.persona === 'admin' || r.persona === 'member';
  lines.push(`# as ${PERSONA_NOTE[r.persona]}; ids and keys are the fuzz run's (its service is gone): set SVC and TOKEN to replay elsewhere`);
  lines.push(`SVC=\${SVC:-${f.base}}${usesKey ? `; TOKEN=\${TOKEN:-${auth!.slice('Bearer '.length)}}` : ''}`);
  const args: string[] = ['curl', '-sS', '-i', '--path-as-is', '-g'];
  if (r.method.toUpperCase() === 'HEAD') args.push('-I');
  else args.push('-X', q(r.method));
  args.push(targetArg(r.path + (r.query ? `?${r.query}` : '')));
  if (usesKey) args.push('-H', `"Authorization: Bearer $TOKEN"`);
  else if (auth !== undefined) args.push('-H', q(`Authorization: ${auth}`));
  const names = new Set(r.headers.map(([k]) => k.toLowerCase()));
  for (const [k, v] of r.headers) args.push('-H', v === '' ? q(`${k};`) : q(`${k}: ${v}`));
  // curl adds headers of its own that the fuzzer did not send: remove them.
  args.push('-H', q('Accept:'), '-H', q('User-Agent:'));
  let pipe = '';
  if (r.body !== undefined) {
    if (!names.has('content-type')) args.push('-H', q('Content-Type:')); // else curl says x-www-form-urlencoded
    args.push('-H', q('Expect:'));
    if (r.body.length > INLINE_BODY_MAX || r.body.includes(0)) {
      mkdirSync(outDir, { recursive: true });
      const file = join(outDir, `body-${createHash('sha256').update(r.body).digest('hex').slice(0, 16)}.bin`);
      writeFileSync(file, r.body);
      args.push('--data-binary', q(`@${file}`));
      pipe = `  # body: ${r.body.length} bytes in ${file}, starting ${JSON.stringify(r.body.subarray(0, 100).toString('latin1'))}`;
    } else args.push('--data-binary', shellQuote(r.body));
  }
  lines.push(args.join(' ') + pipe);
  return lines.join('\n');
}

export function describeResponse(res: FuzzResponse): string {
  if (res.error) return `-> no response: ${res.error}`;
  const body = res.body.toString('utf8');
  const shown = body.length > 800 ? `${body.slice(0, 800)}…(${res.body.length} bytes)` : body;
  return `-> ${res.status} content-type=${res.headers['content-type'] ?? '(none)'} x-request-id=${res.headers['x-request-id'] ?? '(none)'}\n   ${shown || '(empty body)'}`;
}

export function failureReport(r: FuzzRequest, res: FuzzResponse, findings: Finding[], f: Fixtures, outDir: string): string {
  return [
    ...findings.map((x) => `[${x.oracle}] ${x.detail}`),
    `${r.method} ${r.route} (${r.labels.join(', ')})`,
    curlCommand(r, f, outDir),
    describeResponse(res),
  ].join('\n');
}
