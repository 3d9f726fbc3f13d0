/**
 * `npm run bench:oauth`: what OAuth access tokens cost, on loopback only.
 *
 *   1. Starts the compiled service (dist/src/main.js, as `npm start` runs it; the script builds
 *      first) in a child process against a fresh database (BENCH_DATABASE_URL, default
 *      .../svc_bench_oauth; dropped at the start of each run and left behind at the end for
 *      inspection), with SVC_BASE_URL set to its own URL (the provider's issuer), so the port is
 *      chosen before the start.
 *   2. Bootstraps an admin key (POST /keys on the empty server), writes one core.note item,
 *      registers a confidential client for client_credentials (POST /auth/clients) and gets an
 *      `svc_at_` token from it (scope core.note:read), and makes a member API key that may read
 *      core.note and nothing more: the token's and the key's permissions are the same.
 *   3. Read path: GET /items/{id} with the API key (the baseline) and with the token, under
 *      autocannon at 10 connections for BENCH_DURATION seconds (default 10), in BENCH_ROUNDS
 *      alternating rounds (default 3; the order flips every round). Prints the median over the
 *      rounds of requests/s, p50/p99 latency, and the CPU per request of the service's process
 *      and of the bench database's PostgreSQL backends (from /proc, so on Linux), and the ratios
 *      token/key. Target (the issue): the token path costs no more than 1.2x the key path.
 *   4. The provider's endpoints, alternating in the same way: POST /auth/oauth2/token
 *      (client_credentials, HTTP Basic; each request issues a token, a row in oidc_models) and
 *      POST /auth/oauth2/introspect of the token from step 2.
 *
 * Every kind of request first runs unmeasured for BENCH_WARMUP seconds (default 2). Each phase
 * counts its non-2xx answers (and errors, timeouts), printed beside its numbers, so that a broken
 * phase shows. The load generator runs in this process, on the same machine as the service and
 * PostgreSQL, so requests/s is what they share; CPU per request is the steadier figure.
 *
 * Env: BENCH_DATABASE_URL, BENCH_REDIS_URL, BENCH_DURATION, BENCH_ROUNDS, BENCH_WARMUP,
 * BENCH_SERVICE_NODE_OPTIONS (bench/service.ts, e.g. '--cpu-prof --cpu-prof-dir=/tmp/prof').
 * A run takes about 2.5 minutes with the defaults (build included).
 * Logs and rate limits are off in the service. Not a test: nothing is asserted.
 */
import autocannon from 'autocannon';
import { cpus } from 'node:os';
import { Pool } from 'pg';
import { cpuMs, dropDatabase, freePort, startService, stopService } from './service';

const DATABASE_URL = process.env.BENCH_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/svc_bench_oauth';
const REDIS_URL = process.env.BENCH_REDIS_URL ?? 'redis://127.0.0.1:6379';
const DURATION = Number(process.env.BENCH_DURATION ?? 10);
const ROUNDS = Math.max(1, Math.floor(Number(process.env.BENCH_ROUNDS ?? 3)));
const WARMUP = Number(process.env.BENCH_WARMUP ?? 2);
const CONNECTIONS = 10;
const TARGET = 1.2;

interface Load {
  path: string;
  method: 'GET' | 'POST';
  headers: Record<string, string>;
  body?: string;
}

interface Round {
  rps: number;
  p50: number;
  p99: number;
  requests: number;
  /** CPU µs per request: the service's process, the bench database's PostgreSQL backends. */
  serviceUs: number;
  postgresUs: number;
  non2xx: number;
  errors: number;
  timeouts: number;
  statuses: Record<string, number>;
}

const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2;
};

/** CPU so far (ms) of the service and of each PostgreSQL backend of the bench database. */
async function cpuMark(pool: Pool, servicePid: number): Promise<{ service: number; backends: Map<number, number> }> {
  const { rows } = await pool.query(`SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()`);
  return { service: cpuMs(servicePid), backends: new Map((rows as Array<{ pid: number }>).map(({ pid }) => [pid, cpuMs(pid)])) };
}

async function run(url: string, load: Load, seconds: number, pool?: Pool, servicePid?: number): Promise<Round> {
  const a = pool ? await cpuMark(pool, servicePid!) : undefined;
  const result = await autocannon({
    url: `${url}${load.path}`,
    method: load.method,
    connections: CONNECTIONS,
    duration: seconds,
    headers: load.headers,
    body: load.body,
  });
  const b = pool ? await cpuMark(pool, servicePid!) : undefined;
  const requests = result.requests.total;
  let postgres = 0;
  if (a && b) for (const [pid, ms] of b.backends) postgres += ms - (a.backends.get(pid) ?? 0);
  const statuses: Record<string, number> = {};
  for (const [code, { count }] of Object.entries((result as unknown as { statusCodeStats?: Record<string, { count: number }> }).statusCodeStats ?? {})) {
    statuses[code] = count;
  }
  return {
    rps: result.requests.average,
    p50: result.latency.p50,
    p99: result.latency.p99,
    requests,
    serviceUs: a && b && requests ? ((b.service - a.service) * 1000) / requests : NaN,
    postgresUs: a && b && requests ? (postgres * 1000) / requests : NaN,
    non2xx: result.non2xx,
    errors: result.errors,
    timeouts: result.timeouts,
    statuses,
  };
}

/** Medians over rounds; failures summed. */
function summary(rounds: Round[]) {
  const statuses: Record<string, number> = {};
  for (const r of rounds) for (const [c, n] of Object.entries(r.statuses)) statuses[c] = (statuses[c] ?? 0) + n;
  return {
    rps: median(rounds.map((r) => r.rps)),
    p50: median(rounds.map((r) => r.p50)),
    p99: median(rounds.map((r) => r.p99)),
    serviceUs: median(rounds.map((r) => r.serviceUs)),
    postgresUs: median(rounds.map((r) => r.postgresUs)),
    requests: rounds.reduce((s, r) => s + r.requests, 0),
    non2xx: rounds.reduce((s, r) => s + r.non2xx, 0),
    errors: rounds.reduce((s, r) => s + r.errors, 0),
    timeouts: rounds.reduce((s, r) => s + r.timeouts, 0),
    statuses,
  };
}

const roundLine = (label: string, r: Round) =>
  `  ${label.padEnd(28)} ${r.rps.toFixed(0).padStart(6)} req/s  p50 ${String(r.p50).padStart(3)} ms  p99 ${String(r.p99).padStart(3)} ms  ` +
  `svc ${r.serviceUs.toFixed(0).padStart(5)} µs/req  pg ${r.postgresUs.toFixed(0).padStart(5)} µs/req` +
  (r.non2xx || r.errors || r.timeouts ? `  !! non-2xx ${r.non2xx} errors ${r.errors} timeouts ${r.timeouts} ${JSON.stringify(r.statuses)}` : '');

/** Alternates the loads for ROUNDS rounds (order flipped every round), printing each round. */
async function alternate(url: string, loads: Array<[string, Load]>, pool: Pool, servicePid: number): Promise<Round[][]> {
  const out: Round[][] = loads.map(() => []);
  for (let round = 0; round < ROUNDS; round++) {
    console.log(`round ${round + 1}`);
    const order = loads.map((_, i) => i);
    if (round % 2) order.reverse();
    for (const i of order) {
      const r = await run(url, loads[i][1], DURATION, pool, servicePid);
      out[i].push(r);
      console.log(roundLine(loads[i][0], r));
    }
  }
  return out;
}

async function main(): Promise<void> {
  const runStart = Date.now();
  await dropDatabase(DATABASE_URL);
  const port = await freePort();
  const baseUrl = `http://127.0.0.1:${port}`;
  const { child, url } = await startService(
    {
      DATABASE_URL,
      REDIS_URL,
      REDIS_PREFIX: `svc_bench_oauth_${process.pid}:`,
      LOG_LEVEL: 'silent',
      RATE_LIMIT_ENABLED: 'false',
      SVC_BASE_URL: baseUrl,
    },
    port,
  );
  const pool = new Pool({ connectionString: DATABASE_URL, max: 1 });
  try {
    const expect = async <T>(what: string, res: Response, status: number): Promise<T> => {
      const text = await res.text();
      if (res.status !== status) throw new Error(`${what}: expected ${status}, got ${res.status} ${text.slice(0, 500)}`);
      return JSON.parse(text) as T;
    };
    const json = (key: string | undefined, body: unknown) => ({
      method: 'POST',
      headers: { 'content-type': 'application/json', ...(key ? { authorization: `Bearer ${key}` } : {}) },
      body: JSON.stringify(body),
    });

    // ---------------------------------------------------------------- setup
    const { key: admin } = await expect<{ key: string }>('bootstrap key', await fetch(`${url}/keys`, json(undefined, { label: 'bench admin' })), 201);
    const { id: itemId } = await expect<{ id: string }>(
      'POST /items',
      await fetch(`${url}/items`, json(admin, { type: 'core.note', properties: { title: 'bench' } })),
      201,
    );
    const client = await expect<{ client_id: string; client_secret: string }>(
      'POST /auth/clients',
      await fetch(`${url}/auth/clients`, json(admin, { client_name: 'bench', grant_types: ['client_credentials'], scope: 'core.note:read core.note:write' })),
      201,
    );
    // RFC 6749 2.3.1: id and secret are form-encoded before the Basic encoding.
    const basic = `Basic ${Buffer.from(`${encodeURIComponent(client.client_id)}:${encodeURIComponent(client.client_secret)}`).toString('base64')}`;
    const form = { 'content-type': 'application/x-www-form-urlencoded', authorization: basic };
    const tokenBody = new URLSearchParams({ grant_type: 'client_credentials', scope: 'core.note:read' }).toString();
    const { access_token: token } = await expect<{ access_token: string }>(
      'POST /auth/oauth2/token',
      await fetch(`${url}/auth/oauth2/token`, { method: 'POST', headers: form, body: tokenBody }),
      200,
    );
    if (!token?.startsWith('svc_at_')) throw new Error(`token endpoint gave ${token}, not an svc_at_ token`);
    const { key: member } = await expect<{ key: string }>(
      'POST /keys (member)',
      await fetch(`${url}/keys`, json(admin, { label: 'bench member', role: 'member', type_permissions: { 'core.note': 'read' } })),
      201,
    );
    const introspectBody = new URLSearchParams({ token }).toString();
    const check = await expect<{ active: boolean }>(
      'POST /auth/oauth2/introspect',
      await fetch(`${url}/auth/oauth2/introspect`, { method: 'POST', headers: form, body: introspectBody }),
      200,
    );
    if (!check.active) throw new Error('introspection says the fresh token is not active');
    for (const [what, credential] of [['key', member], ['token', token]]) {
      await expect(`GET /items/{id} with the ${what}`, await fetch(`${url}/items/${itemId}`, { headers: { authorization: `Bearer ${credential}` } }), 200);
    }
    console.log(`service ${url} (SVC_BASE_URL ${baseUrl}), pid ${child.pid}; item ${itemId}, client ${client.client_id}`);

    const loads: Record<'key' | 'token' | 'issue' | 'introspect', [string, Load]> = {
      key: ['GET /items/{id}, API key', { path: `/items/${itemId}`, method: 'GET', headers: { authorization: `Bearer ${member}` } }],
      token: ['GET /items/{id}, svc_at_ token', { path: `/items/${itemId}`, method: 'GET', headers: { authorization: `Bearer ${token}` } }],
      issue: ['POST /auth/oauth2/token', { path: '/auth/oauth2/token', method: 'POST', headers: form, body: tokenBody }],
      introspect: ['POST /auth/oauth2/introspect', { path: '/auth/oauth2/introspect', method: 'POST', headers: form, body: introspectBody }],
    };

    // ---------------------------------------------------------------- warm-up, then the measured rounds
    if (WARMUP > 0) {
      for (const [label, load] of Object.values(loads)) {
        const r = await run(url, load, WARMUP);
        console.log(`warm-up ${label}: ${r.requests} requests${r.non2xx || r.errors ? `, !! non-2xx ${r.non2xx} errors ${r.errors} ${JSON.stringify(r.statuses)}` : ''}`);
      }
    }
    console.log(`\nread path: ${ROUNDS} alternating rounds of ${DURATION} s at ${CONNECTIONS} connections`);
    const [keyRounds, tokenRounds] = await alternate(url, [loads.key, loads.token], pool, child.pid!);
    console.log(`\nprovider endpoints: ${ROUNDS} alternating rounds of ${DURATION} s at ${CONNECTIONS} connections`);
    const [issueRounds, introspectRounds] = await alternate(url, [loads.issue, loads.introspect], pool, child.pid!);

    // ---------------------------------------------------------------- summary
    console.log(`\nmedians over ${ROUNDS} rounds of ${DURATION} s, ${CONNECTIONS} connections (node ${process.version}, ${cpus().length} CPUs; load generator on the same machine)\n`);
    const head = ['phase', 'req/s', 'p50 ms', 'p99 ms', 'svc µs/req', 'pg µs/req', 'requests', 'non-2xx', 'errors', 'timeouts'];
    const widths = [30, 7, 7, 7, 11, 10, 9, 8, 7, 9];
    const line = (cells: string[]) => console.log(cells.map((c, i) => (i === 0 ? c.padEnd(widths[i]) : c.padStart(widths[i]))).join(' '));
    line(head);
    const sums = {
      key: summary(keyRounds),
      token: summary(tokenRounds),
      issue: summary(issueRounds),
      introspect: summary(introspectRounds),
    };
    for (const name of ['key', 'token', 'issue', 'introspect'] as const) {
      const s = sums[name];
      line([
        loads[name][0], s.rps.toFixed(0), String(s.p50), String(s.p99), s.serviceUs.toFixed(0), s.postgresUs.toFixed(0),
        String(s.requests), String(s.non2xx), String(s.errors), String(s.timeouts),
      ]);
    }
    for (const name of ['key', 'token', 'issue', 'introspect'] as const) {
      const s = sums[name];
      if (s.non2xx || s.errors || s.timeouts) console.log(`  !! ${loads[name][0]}: status codes ${JSON.stringify(s.statuses)}`);
    }
    const { key, token: tok } = sums;
    const cpuRatio = tok.serviceUs / key.serviceUs;
    const allCpuRatio = (tok.serviceUs + tok.postgresUs) / (key.serviceUs + key.postgresUs);
    const rpsRatio = key.rps / tok.rps;
    const verdict = (x: number) => (x <= TARGET ? `<= ${TARGET}, met` : `> ${TARGET}, NOT met`);
    console.log(`\ntoken path vs key path (target: the token path costs no more than ${TARGET}x the key path)`);
    console.log(`  service CPU per request, token/key:             ${cpuRatio.toFixed(2)}  (${verdict(cpuRatio)})`);
    console.log(`  service + PostgreSQL CPU per request, token/key: ${allCpuRatio.toFixed(2)}  (${verdict(allCpuRatio)})`);
    console.log(`  requests/s, key/token:                           ${rpsRatio.toFixed(2)}  (${verdict(rpsRatio)})`);
    console.log(`  p50 latency, token/key:                          ${(tok.p50 / key.p50).toFixed(2)}`);
    console.log(`\nwhole run ${((Date.now() - runStart) / 1000).toFixed(0)} s (after the build)`);
  } finally {
    await pool.end();
    await stopService(child);
  }
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
