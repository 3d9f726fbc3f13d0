/**
 * The service as a process (`node dist/src/main.js`, what `npm start` runs): start-up failures
 * are one line on stderr, the database is created and migrated at start, and the structured
 * logs on stdout never contain a credential.
 */
import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { randomBytes } from 'node:crypto';
import { tmpdir } from 'node:os';
import { createServer as createTlsServer } from 'node:tls';
import { promisify } from 'node:util';
import { AddressInfo, connect, createServer } from 'node:net';
import path from 'node:path';
import { Client } from 'pg';
import { clearRedisPrefix, dropDatabase, PG_SERVER, REDIS_URL, uniqueName } from './support/app';
import { ensureBuilt, freePort, ROOT, runService, Service, waitHealthy } from './support/process';
import { pipelineUntilClosed } from './support/raw-http';
import { Receiver } from './support/receiver';
import { TcpProxy } from './support/tcp-proxy';
import { waitFor } from './support/wait';

jest.setTimeout(60_000);

async function pgQuery<T = Record<string, unknown>>(database: string, text: string, params: unknown[] = []): Promise<T[]> {
  const client = new Client({ connectionString: `${PG_SERVER}/${database}` });
  await client.connect();
  try {
    return (await client.query(text, params)).rows as T[];
  } finally {
    await client.end();
  }
}

describe('the service process', () => {
  const services: Service[] = [];
  const databases: string[] = [];
  const prefixes: string[] = [];

  function env(overrides: Record<string, string> = {}): Record<string, string> {
    const db = uniqueName('svc_proc');
    const prefix = `${uniqueName('svcp')}:`;
    databases.push(db);
    prefixes.push(prefix);
    return {
      NODE_ENV: 'test',
      DATABASE_URL: `${PG_SERVER}/${db}`,
      REDIS_URL,
      REDIS_PREFIX: prefix,
      HOST: '127.0.0.1',
      LOG_LEVEL: 'info',
      RATE_LIMIT_ENABLED: 'false',
      ...overrides,
    };
  }

  function start(e: Record<string, string>): Service {
    const s = runService(e);
    services.push(s);
    return s;
  }

  /**
   * Runs a start that must fail; returns its exit code and stderr lines. A start that serves
   * instead (GET /health 200) is stopped and reported as such rather than waited on.
   */
  async function failedStart(e: Record<string, string>): Promise<{ code: number | null; lines: string[] }> {
    const port = String(await freePort());
    const s = start({ PORT: port, ...e });
    let exited = false;
    void s.exited.then(() => (exited = true));
    const served = await waitFor(
      async () => exited || (await fetch(`http://127.0.0.1:${e.PORT ?? port}/health`).then((r) => r.status === 200, () => false)),
      'the start to fail',
      30_000,
      100,
    ).then(() => !exited);
    if (served) {
      await s.stop();
      return { code: null, lines: ['started and served GET /health 200'] };
    }
    const { code } = await s.exited;
    return { code, lines: s.stderr().split('\n').filter((l) => l.trim() !== '') };
  }

  beforeAll(() => ensureBuilt(), 180_000);

  afterAll(async () => {
    await Promise.all(services.map((s) => s.stop()));
    for (const db of databases) await dropDatabase(db);
    for (const prefix of prefixes) await clearRedisPrefix(prefix);
  });

  describe('start-up failures: non-zero exit, one stderr line naming the problem, no stack trace', () => {
    type Failure = { code: number | null; lines: string[] };
    const cases: Record<string, Record<string, string>> = {
      port: { PORT: 'abc' },
      postgres: { DATABASE_URL: 'postgres://postgres@127.0.0.1:1/svc_unreachable' },
      postgresPassword: { DATABASE_URL: 'postgres://svc:hunter2secret@127.0.0.1:1/svc' },
      redis: { REDIS_URL: 'redis://127.0.0.1:1' },
      // Answered, and refused: a role the server does not know, a database index past its `databases`.
      postgresRole: { DATABASE_URL: `${PG_SERVER.replace(/\/\/[^@/]*@/, '//')}`.replace('//', '//svc_no_such_role@') + '/svc' },
      redisDatabase: { REDIS_URL: new URL('/99999', REDIS_URL).toString() },
      blobDirBelowFile: { BLOB_DIR: path.join(ROOT, 'package.json', 'blobs') },
      hostElsewhere: { HOST: '192.0.2.1' }, // TEST-NET-1: no interface of this machine
    };
    const results: Record<string, Failure> = {};

    // The processes are independent: start them together to keep the file quick.
    beforeAll(async () => {
      await Promise.all(
        Object.entries(cases).map(async ([name, overrides]) => {
          results[name] = await failedStart(env(overrides));
        }),
      );
    }, 60_000);

    const expectOneLine = (r: Failure) => {
      expect(r.code).not.toBe(0);
      expect(r.code).not.toBeNull();
      expect(r.lines).toHaveLength(1);
      expect(r.lines[0]).not.toMatch(/^\s+at /);
      return r.lines[0];
    };

    it('an invalid PORT', () => {
      expect(expectOneLine(results.port)).toContain('PORT');
    });

    it('PostgreSQL unreachable', () => {
      expect(expectOneLine(results.postgres)).toContain('postgres://postgres@127.0.0.1:1/svc_unreachable');
    });

    it('a password in an unreachable DATABASE_URL is not printed', () => {
      const line = expectOneLine(results.postgresPassword);
      expect(line).toContain('127.0.0.1:1');
      expect(line).not.toContain('hunter2secret');
    });

    it('Redis unreachable', () => {
      expect(expectOneLine(results.redis)).toContain('redis://127.0.0.1:1');
    });

    it('PostgreSQL refusing the role: the line says so, not to start the server', () => {
      const line = expectOneLine(results.postgresRole);
      expect(line).toContain('svc_no_such_role');
      expect(line).toContain('DATABASE_URL');
      expect(line).not.toContain('pg_ctlcluster');
    });

    it('a HOST it cannot listen on', () => {
      const line = expectOneLine(results.hostElsewhere);
      expect(line).toContain('192.0.2.1');
      expect(line).toMatch(/PORT or HOST/);
    });

    it('a BLOB_DIR that cannot be made (below a file)', () => {
      const line = expectOneLine(results.blobDirBelowFile);
      expect(line).toContain('BLOB_DIR');
      expect(line).toContain(path.join(ROOT, 'package.json'));
    });

    it('a Redis database the server refuses (rather than every connection quietly in database 0)', () => {
      const line = expectOneLine(results.redisDatabase);
      expect(line).toContain('99999');
      expect(line).toContain('REDIS_URL');
    });
  });

  it('creates a missing database, runs the migrations, and logs JSON lines without credentials', async () => {
    const e = env({ PORT: String(await freePort()) });
    const db = new URL(e.DATABASE_URL).pathname.slice(1);
    expect(await pgQuery('postgres', 'SELECT 1 FROM pg_database WHERE datname = $1', [db])).toHaveLength(0);
    const s = start(e);
    const base = `http://127.0.0.1:${e.PORT}`;
    await waitHealthy(s, base);

    expect(await pgQuery('postgres', 'SELECT 1 FROM pg_database WHERE datname = $1', [db])).toHaveLength(1);
    const tables = (await pgQuery<{ tablename: string }>(db, `SELECT tablename FROM pg_tables WHERE schemaname = 'public'`)).map((r) => r.tablename);
    expect(tables).toEqual(expect.arrayContaining(['tenants', 'api_keys', 'migrations']));

    // Credentials in every place a client might put them.
    const created = await fetch(`${base}/keys`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{"label":"logged"}' });
    expect(created.status).toBe(201);
    const { key, id } = (await created.json()) as { key: string; id: string };
    const requestIds: string[] = [];
    for (const [path, headers] of [
      ['/keys', { authorization: `Bearer ${key}` }],
      [`/keys/${id}?access_token=${encodeURIComponent(key)}`, {}],
      [`/keys/${id}?access_token=${encodeURIComponent(key)}`, { authorization: `Bearer ${key}` }],
      ['/no-such-route', { authorization: `Bearer ${key}`, cookie: `session=${key}` }],
    ] as Array<[string, Record<string, string>]>) {
      const res = await fetch(base + path, { headers });
      await res.arrayBuffer();
      requestIds.push(res.headers.get('x-request-id')!);
    }
    expect(requestIds.every((r) => typeof r === 'string' && r.length > 0)).toBe(true);

    // Every request is logged once it completes; wait for the last one, then stop the process.
    await waitForOutput(s, requestIds[requestIds.length - 1]);
    await s.stop();

    const lines = s.stdout().split('\n').filter((l) => l.trim() !== '');
    expect(lines.length).toBeGreaterThan(0);
    const records = lines.map((l) => {
      try {
        return JSON.parse(l) as Record<string, any>;
      } catch {
        throw new Error(`not a JSON log line: ${l}`);
      }
    });
    for (const r of records) {
      expect(typeof r.level).toBe('number');
      expect(typeof r.time).toBe('number');
    }
    const requestLogs = records.filter((r) => r.req);
    for (const rid of requestIds) expect(requestLogs.map((r) => r.req.id)).toContain(rid);
    // One line per request, at info for 2xx and warn for 4xx, with its outcome and duration.
    const lineOf = (rid: string) => requestLogs.filter((r) => r.req.id === rid);
    expect(lineOf(requestIds[0])).toEqual([
      expect.objectContaining({ level: 30, msg: 'request completed', req: expect.objectContaining({ method: 'GET', url: '/keys' }), res: { statusCode: 200 }, responseTime: expect.any(Number) }),
    ]);
    expect(lineOf(requestIds[3])).toEqual([expect.objectContaining({ level: 40, res: { statusCode: 404 } })]);
    expect(records.some((r) => r.context === 'NestApplication')).toBe(true);

    const everything = s.stdout() + s.stderr();
    const secret = key.slice('svc_k1_'.length);
    expect(everything).not.toContain(secret);
    expect(everything).not.toContain(encodeURIComponent(key));
    expect(everything).not.toContain(secret.slice(0, 16));
  });

  it('warns when it runs in production without SVC_BASE_URL (the issuer would be localhost), and not when it is set', async () => {
    const production = { NODE_ENV: 'production', SVC_ENCRYPTION_KEY: randomBytes(32).toString('base64'), SVC_OAUTH_REDIRECT_ALLOWLIST: 'https://app.example.com/cb', LOG_LEVEL: 'warn' };
    const outputs: string[] = [];
    for (const base of [undefined, 'https://svc.example.com']) {
      const e = env({ ...production, PORT: String(await freePort()), ...(base ? { SVC_BASE_URL: base } : {}) });
      const s = start(e);
      await waitHealthy(s, `http://127.0.0.1:${e.PORT}`);
      await s.stop();
      outputs.push(s.stdout());
    }
    expect(outputs[0]).toMatch(/"level":40,[^\n]*SVC_BASE_URL is unset/);
    expect(outputs[1]).not.toContain('SVC_BASE_URL');
  });

  it('warns when another deployment (another database) shares its REDIS_PREFIX, and not for another instance of its own', async () => {
    const first = env({ PORT: String(await freePort()), LOG_LEVEL: 'warn' });
    const sameDeployment = { ...first, PORT: String(await freePort()) };
    const otherDeployment = env({ PORT: String(await freePort()), LOG_LEVEL: 'warn', REDIS_PREFIX: first.REDIS_PREFIX });
    const started: Service[] = [];
    for (const e of [first, sameDeployment, otherDeployment]) {
      const s = start(e);
      await waitHealthy(s, `http://127.0.0.1:${e.PORT}`);
      started.push(s);
    }
    await Promise.all(started.map((s) => s.stop()));
    const warned = started.map((s) => /"level":40,[^\n]*REDIS_PREFIX is in use by another deployment/.test(s.stdout()));
    expect(warned).toEqual([false, false, true]);
    expect(started[2].stdout()).toContain(`"otherDatabase":"${new URL(first.DATABASE_URL).pathname.slice(1)}"`);
  });

  it('stops starting, in one line, when Redis accepts connections and never answers', async () => {
    // A listener that accepts and reads nothing: the TCP connect succeeds, the PING never returns.
    const silent = createServer((socket) => socket.on('error', () => undefined));
    await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve));
    try {
      const url = `redis://127.0.0.1:${(silent.address() as AddressInfo).port}`;
      const { code, lines } = await failedStart(env({ REDIS_URL: url }));
      expect(code).toBe(1);
      expect(lines).toEqual([expect.stringContaining(`cannot reach Redis at ${url}`)]);
    } finally {
      silent.close();
    }
  });

  it('on SIGTERM answers a request in flight on a kept-alive connection, then closes that connection and ends without waiting for its deadline', async () => {
    const e = env({ PORT: String(await freePort()), LOG_LEVEL: 'warn' });
    const s = start(e);
    const base = `http://127.0.0.1:${e.PORT}`;
    await waitHealthy(s, base);
    const { key } = (await (await fetch(`${base}/keys`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}' })).json()) as { key: string };
    const socket = connect(Number(e.PORT), '127.0.0.1');
    let received = '';
    socket.on('data', (d: Buffer) => (received += d.toString('latin1')));
    socket.on('error', () => undefined);
    const closed = new Promise<void>((resolve) => socket.on('close', () => resolve()));
    const body = Buffer.alloc(20_000, 'x');
    socket.write(
      `POST /blobs HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer ${key}\r\nContent-Type: text/plain\r\n` +
        `Content-Length: ${body.length}\r\nConnection: keep-alive\r\n\r\n`,
    );
    socket.write(body.subarray(0, 10_000));
    s.child.kill('SIGTERM');
    // The listener closes as the shutdown begins; the upload is then still in flight.
    await waitFor(async () => (await fetch(`${base}/health`).then(() => false, () => true)), 'the listener to close');
    socket.write(body.subarray(10_000));
    await closed;
    expect(received).toMatch(/^HTTP\/1\.1 201 /);
    const { code, signal } = await s.exited;
    // The shutdown's deadline ends the process with exit code 1; a drained one ends as SIGTERM does.
    expect(code === 0 || code === 143 || signal === 'SIGTERM').toBe(true);
  });

  it('logs a Redis outage the event relay meets once, not once per pass, and its end', async () => {
    const proxy = await new TcpProxy('127.0.0.1', Number(new URL(REDIS_URL).port || 6379)).start();
    try {
      const e = env({ PORT: String(await freePort()), REDIS_URL: `redis://127.0.0.1:${proxy.port}`, LOG_LEVEL: 'info' });
      const db = new URL(e.DATABASE_URL).pathname.slice(1);
      const s = start(e);
      const base = `http://127.0.0.1:${e.PORT}`;
      await waitHealthy(s, base);
      const { key } = (await (await fetch(`${base}/keys`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}' })).json()) as { key: string };
      /** A note, once a relay pass has claimed (numbered) its event: that pass published it, or failed to. */
      const noteClaimed = async () => {
        const res = await fetch(`${base}/items`, { method: 'POST', headers: { 'content-type': 'application/json', authorization: `Bearer ${key}` }, body: '{"type":"core.note","properties":{"title":"n"}}' });
        expect(res.status).toBe(201);
        const { id } = (await res.json()) as { id: string };
        await waitFor(async () => (await pgQuery(db, `SELECT 1 FROM events WHERE (payload->'item'->>'id') = $1 AND published_seq IS NOT NULL`, [id])).length > 0, 'the note\'s event claimed');
      };
      await noteClaimed();
      await proxy.cut();
      for (let i = 0; i < 6; i++) await noteClaimed();
      await proxy.restore();
      await waitFor(() => /event relay pass failed; retrying on the next poll: recovered/.test(s.stdout()), 'the recovery logged', 30_000);
      const lines = s.stdout().split('\n').filter((l) => l.includes('event relay pass failed'));
      expect(lines.map((l) => (JSON.parse(l) as { msg: string }).msg)).toEqual(['event relay pass failed; retrying on the next poll', 'event relay pass failed; retrying on the next poll: recovered']);
      await s.stop();
    } finally {
      await proxy.stop();
    }
  });

  it('answers while its Redis connection goes silent (no answer, no reset): the rate limit counts in memory after a short wait', async () => {
    const proxy = await new TcpProxy('127.0.0.1', Number(new URL(REDIS_URL).port || 6379)).start();
    try {
      const e = env({ PORT: String(await freePort()), REDIS_URL: `redis://127.0.0.1:${proxy.port}`, RATE_LIMIT_ENABLED: 'true', RATE_LIMIT_REQUESTS: '5', LOG_LEVEL: 'warn' });
      const s = start(e);
      const base = `http://127.0.0.1:${e.PORT}`;
      await waitHealthy(s, base);
      const { key } = (await (await fetch(`${base}/keys`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}' })).json()) as { key: string };
      const write = () => fetch(`${base}/tenants`, { method: 'POST', headers: { 'content-type': 'application/json', authorization: `Bearer ${key}` }, body: '{}', signal: AbortSignal.timeout(10_000) });
      expect((await write()).headers.get('x-ratelimit-remaining')).toBe('4');
      proxy.stall();
      const stalled = await write();
      expect([stalled.status, stalled.headers.get('x-ratelimit-limit'), stalled.headers.get('x-ratelimit-remaining')]).toEqual([400, '5', '4']);
      await proxy.stop(); // the silent connection ends, so the shutdown does not wait on it
      await s.stop();
      expect(s.stdout()).not.toMatch(/"level":60/);
    } finally {
      await proxy.stop();
    }
  });

  it('shuts down within its deadline while Redis accepts connections and never answers', async () => {
    const proxy = await new TcpProxy('127.0.0.1', Number(new URL(REDIS_URL).port || 6379)).start();
    try {
      const e = env({ PORT: String(await freePort()), REDIS_URL: `redis://127.0.0.1:${proxy.port}`, LOG_LEVEL: 'warn' });
      const s = start(e);
      const base = `http://127.0.0.1:${e.PORT}`;
      await waitHealthy(s, base);
      proxy.blackhole();
      await waitFor(async () => (await fetch(`${base}/health`)).status === 503, 'the health check to see Redis gone', 20_000);
      s.child.kill('SIGTERM');
      // Bull's close() waited for ever on its connections; main's 25 s deadline then exited 1.
      const { code, signal } = await s.exited;
      expect(s.stderr()).not.toMatch(/did not finish/);
      expect(code === 0 || signal === 'SIGTERM').toBe(true);
    } finally {
      await proxy.stop();
    }
  }, 60_000);

  it('speaks TLS on every Redis connection of a rediss:// URL, the job queues\' included: a bulk job runs', async () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'svc-tls-'));
    await promisify(execFile)('openssl', ['req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-days', '1', '-subj', '/CN=127.0.0.1', '-addext', 'subjectAltName=IP:127.0.0.1', '-keyout', `${dir}/key.pem`, '-out', `${dir}/cert.pem`]);
    // A TLS front for the shared Redis, counting connections that did not speak TLS.
    let notTls = 0;
    const front = createTlsServer({ key: readFileSync(`${dir}/key.pem`), cert: readFileSync(`${dir}/cert.pem`) }, (client) => {
      const upstream = connect(Number(new URL(REDIS_URL).port || 6379), new URL(REDIS_URL).hostname);
      client.on('error', () => upstream.destroy());
      upstream.on('error', () => client.destroy());
      client.pipe(upstream).pipe(client);
    });
    front.on('tlsClientError', () => notTls++);
    await new Promise<void>((resolve) => front.listen(0, '127.0.0.1', resolve));
    try {
      const e = env({
        PORT: String(await freePort()),
        REDIS_URL: `rediss://127.0.0.1:${(front.address() as AddressInfo).port}`,
        NODE_EXTRA_CA_CERTS: `${dir}/cert.pem`,
        BULK_SYNC_MAX: '0',
        LOG_LEVEL: 'warn',
      });
      const s = start(e);
      const base = `http://127.0.0.1:${e.PORT}`;
      await waitHealthy(s, base);
      const call = async (method: string, path: string, body?: unknown, key?: string) =>
        (await fetch(base + path, { method, headers: { 'content-type': 'application/json', ...(key ? { authorization: `Bearer ${key}` } : {}) }, body: body === undefined ? undefined : JSON.stringify(body) })).json() as Promise<any>;
      const { key } = await call('POST', '/keys', {});
      await call('POST', '/items', { type: 'core.note', properties: { title: 'over tls' } }, key);
      const job = await call('POST', '/items/bulk_action', { action: 'update_tags', add_tags: ['tls'] }, key);
      expect(job.status).toBe('queued');
      await waitFor(async () => (await call('GET', `/items/bulk_action/jobs/${job.id}`, undefined, key)).status === 'completed', 'the bulk job run through the queue');
      expect(notTls).toBe(0);
      expect(s.stdout()).not.toMatch(/"level":(50|60)/);
    } finally {
      front.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('on SIGTERM lets webhook attempts under way finish and records them before the pools close, sends new event streams elsewhere, then ends cleanly', async () => {
    const receiver = new Receiver();
    const target = await receiver.start();
    receiver.respond = () => new Promise((resolve) => setTimeout(() => resolve(200), 1500));
    try {
      const e = env({ PORT: String(await freePort()), WEBHOOK_ALLOW_PRIVATE_TARGETS: 'true', LOG_LEVEL: 'warn', RATE_LIMIT_ENABLED: 'true' });
      const s = start(e);
      const base = `http://127.0.0.1:${e.PORT}`;
      await waitHealthy(s, base);
      const post = async (path: string, body: unknown, key?: string) =>
        (await fetch(base + path, { method: 'POST', headers: { 'content-type': 'application/json', ...(key ? { authorization: `Bearer ${key}` } : {}) }, body: JSON.stringify(body) })).json();
      const { key } = (await post('/keys', {})) as { key: string };
      await post('/webhooks', { url: `${target}/slow`, events: ['item.created'] }, key);
      for (let i = 0; i < 5; i++) await post('/items', { type: 'core.note', properties: { title: `n${i}` } }, key);
      await waitFor(() => receiver.requests.length === 5, 'five attempts under way');

      s.child.kill('SIGTERM');
      // A stream client comes back (retry: 3000) while the attempts finish: a stream opened now
      // would hold the server open until the shutdown deadline, so it is sent elsewhere, with a
      // 200 that says when to come back and ends (an EventSource gives up on any other status).
      // Streams that opened before shutdown began are closed by it; a stream asked before SIGTERM
      // took effect does not end, and is given up after a second.
      const sentAway = await waitFor(async () => {
        const res = await fetch(`${base}/events`, { headers: { authorization: `Bearer ${key}` }, signal: AbortSignal.timeout(1000) });
        const body = await res.text();
        return /shutting down/.test(body) && { res, body };
      }, 'a new event stream sent away during shutdown');
      expect([sentAway.res.status, sentAway.res.headers.get('content-type')]).toEqual([200, 'text/event-stream; charset=utf-8']);
      expect(sentAway.body).toMatch(/^retry: 3000$/m);
      expect(sentAway.res.headers.get('x-ratelimit-limit')).toBe('600'); // SPEC 8.1: every response carries them
      const { code, signal } = await s.exited;
      expect(code === 0 || signal === 'SIGTERM').toBe(true);
      expect(s.stderr()).toBe('');
      // No error logged on the way out (a rolling restart is no alert).
      expect(s.stdout()).not.toMatch(/"level":(50|60)/);
      const db = new URL(e.DATABASE_URL).pathname.slice(1);
      expect((await pgQuery<{ status: string }>(db, 'SELECT status FROM webhook_deliveries')).map((r) => r.status)).toEqual(Array(5).fill('succeeded'));
    } finally {
      await receiver.stop();
    }
  });

  it('answers requests that reach it while it closes (pipelined, or on a busy kept-alive connection) with 503 and Retry-After, in the envelope or, at the token endpoint, in RFC 6749 form', async () => {
    const e = env({ PORT: String(await freePort()), LOG_LEVEL: 'warn', RATE_LIMIT_ENABLED: 'true', RATE_LIMIT_REQUESTS: '100000' });
    const s = start(e);
    const base = `http://127.0.0.1:${e.PORT}`;
    await waitHealthy(s, base);
    const { key } = (await (await fetch(`${base}/keys`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}' })).json()) as { key: string };
    const request = `GET /items?limit=1 HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer ${key}\r\n\r\n`;
    const connections = Array.from({ length: 4 }, () => pipelineUntilClosed(base, request));
    await waitFor(() => connections.every((c) => c.answers.length >= 10), 'every connection answered in turn');
    // A token request that reaches the instance while it closes, behind a write whose body it is
    // still reading (so that its connection is busy, not idle and closed).
    const note = '{"type":"core.note","properties":{"title":"slow"}}';
    const form = 'grant_type=client_credentials&client_id=nobody&client_secret=nothing';
    const busy = connect(Number(e.PORT), '127.0.0.1');
    let received = '';
    busy.setEncoding('latin1');
    busy.on('data', (chunk: string) => (received += chunk));
    busy.on('error', () => undefined);
    const busyClosed = new Promise((resolve) => busy.on('close', resolve));
    await new Promise((resolve) => busy.once('connect', resolve));
    busy.write(`POST /items HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer ${key}\r\nContent-Type: application/json\r\nContent-Length: ${note.length}\r\n\r\n${note.slice(0, 5)}`);
    s.child.kill('SIGTERM');
    await waitFor(async () => fetch(`${base}/health`).then(() => false, () => true), 'the listener to close');
    busy.write(`${note.slice(5)}POST /auth/oauth2/token HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/x-www-form-urlencoded\r\nContent-Length: ${form.length}\r\n\r\n${form}`);
    const answers = (await Promise.all(connections.map((c) => c.closed))).flat();
    await busyClosed;
    await s.exited;
    for (const answer of answers.filter((a) => a.status !== 200)) {
      expect(answer.status).toBe(503);
      expect(answer.headers).toMatch(/\r\nretry-after: *2/i);
      expect(answer.headers).toMatch(/\r\nx-request-id: /i);
      expect(answer.headers).toMatch(/\r\nx-ratelimit-limit: 200000\r\n/i); // SPEC 8.1: every response carries them
      expect(JSON.parse(answer.body).error.code).toBe('service_unavailable');
    }
    expect(answers.filter((a) => a.status === 200).length).toBeGreaterThan(0);
    // The write begun before the shutdown is answered; the token request after it, in RFC 6749's form, which its clients read.
    const [written, refused] = received.split(/(?=HTTP\/1\.1 )/);
    expect(written.slice(9, 12)).toBe('201');
    expect(refused.slice(9, 12)).toBe('503');
    expect(refused).toMatch(/\r\nretry-after: *2/i);
    expect(JSON.parse(refused.slice(refused.indexOf('\r\n\r\n') + 4))).toEqual({ error: 'temporarily_unavailable', error_description: expect.any(String) });
  });

  it('MIGRATIONS_RUN=false refuses to start, in one line saying how many migrations are pending and how to run them, on a new database (left without the schema)', async () => {
    const e = env({ MIGRATIONS_RUN: 'false' });
    const db = new URL(e.DATABASE_URL).pathname.slice(1);
    const { code, lines } = await failedStart(e);
    expect(lines).toEqual([expect.stringMatching(/^svc: \d+ migrations are pending in .* and MIGRATIONS_RUN=false; run them \(npm run migration:run, or in the Docker image npx typeorm -d dist\/ormconfig.js migration:run\)/)]);
    expect(code).toBe(1);
    expect(await pgQuery('postgres', 'SELECT 1 FROM pg_database WHERE datname = $1', [db])).toHaveLength(1);
    const tables = (await pgQuery<{ tablename: string }>(db, `SELECT tablename FROM pg_tables WHERE schemaname = 'public'`)).map((r) => r.tablename);
    expect(tables).not.toContain('api_keys');
    expect(tables).not.toContain('tenants');
    expect(tables).not.toContain('migrations');
  });

  it('MIGRATIONS_RUN=false starts on a migrated database, and refuses once a migration is pending there', async () => {
    const e = env();
    const db = new URL(e.DATABASE_URL).pathname.slice(1);
    const run = async (overrides: Record<string, string>) => {
      const port = String(await freePort());
      const s = start({ ...e, ...overrides, PORT: port });
      await waitHealthy(s, `http://127.0.0.1:${port}`);
      await s.stop();
    };
    await run({}); // migrates
    await run({ MIGRATIONS_RUN: 'false' });
    // A deploy whose code brings one migration more than the database has.
    await pgQuery(db, 'DELETE FROM migrations WHERE id = (SELECT max(id) FROM migrations)');
    const { code, lines } = await failedStart({ ...e, MIGRATIONS_RUN: 'false' });
    expect(lines).toEqual([expect.stringMatching(/^svc: 1 migration is pending in .* and MIGRATIONS_RUN=false; run them /)]);
    expect(code).toBe(1);
  });

  // The script the README names: `npm run oidc:rotate-key -- <args>` runs it with those args.
  describe('npm run oidc:rotate-key', () => {
    const rotate = (args: string[]) =>
      new Promise<{ code: number | null; stdout: string; stderr: string }>((resolve) => {
        const child = execFile(
          process.execPath,
          [path.join(ROOT, 'dist', 'src', 'oidc', 'rotate-signing-key.js'), ...args],
          // No database answers here: a refusal that comes first never reaches it.
          { cwd: ROOT, env: { PATH: process.env.PATH ?? '', NODE_ENV: 'test', DATABASE_URL: 'postgres://postgres@127.0.0.1:1/svc_rotate' } },
          (_err, stdout, stderr) => resolve({ code: child.exitCode, stdout, stderr }),
        );
      });

    it.each([[['--retire-older-than=abc']], [['--retire', '1']]])('refuses %p with exit code 1 and one line, before it touches the database', async (args) => {
      const { code, stdout, stderr } = await rotate(args);
      expect([code, stdout]).toEqual([1, '']);
      expect(stderr).toBe(
        `oidc:rotate-key: unexpected argument ${JSON.stringify(args[0])}; nothing was rotated; usage: npm run oidc:rotate-key [-- --retire-older-than=<days, 1-36500>]\n`,
      );
    });
  });
});

async function waitForOutput(s: Service, needle: string): Promise<void> {
  await waitFor(() => s.stdout().includes(needle), `"${needle}" in the service's stdout`, 10_000);
}
