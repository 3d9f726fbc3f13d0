/**
 * The request line as the running service (`node dist/src/main.js`, LOG_LEVEL=info) writes it
 * on stdout: secrets sent in a query string are masked, by the parameter's name or because the
 * value is one of the service's own secrets, a request its client abandoned before the answer is
 * logged without the status that was never sent, and requests refused before routing are logged
 * under the id their answer carries.
 */
import { randomBytes } from 'node:crypto';
import { mkdtemp, readdir, rm } from 'node:fs/promises';
import http from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Client } from 'pg';
import { clearRedisPrefix, dropDatabase, PG_SERVER, REDIS_URL, uniqueName } from './support/app';
import { ensureBuilt, freePort, runService, Service, waitHealthy } from './support/process';
import { rawRequest } from './support/raw-http';
import { waitFor } from './support/wait';

jest.setTimeout(60_000);

const REDACTED = '%5Bredacted%5D'; // "[redacted]" as URLSearchParams writes it

describe('request logging (the service process, LOG_LEVEL=info)', () => {
  const db = uniqueName('svc_reqlog');
  const prefix = `${uniqueName('svcl')}:`;
  let blobDir: string;
  let service: Service;
  let base: string;
  let adminKey: string;

  /** The complete JSON lines written so far. */
  const records = () =>
    service
      .stdout()
      .split('\n')
      .slice(0, -1)
      .map((l) => JSON.parse(l) as Record<string, any>);
  const requestLine = (id: string) => waitFor(() => records().find((r) => r.req?.id === id), `the request line of ${id}`);

  beforeAll(async () => {
    ensureBuilt();
    blobDir = await mkdtemp(join(tmpdir(), 'svc-reqlog-'));
    const port = await freePort();
    base = `http://127.0.0.1:${port}`;
    service = runService({
      NODE_ENV: 'test',
      DATABASE_URL: `${PG_SERVER}/${db}`,
      REDIS_URL,
      REDIS_PREFIX: prefix,
      HOST: '127.0.0.1',
      PORT: String(port),
      LOG_LEVEL: 'info',
      RATE_LIMIT_ENABLED: 'false',
      BLOB_DIR: blobDir,
    });
    await waitHealthy(service, base);
    const created = await fetch(`${base}/keys`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{"label":"root"}' });
    expect(created.status).toBe(201);
    adminKey = ((await created.json()) as { key: string }).key;
  }, 180_000);

  afterAll(async () => {
    await service?.stop();
    await dropDatabase(db);
    await clearRedisPrefix(prefix);
    if (blobDir) await rm(blobDir, { recursive: true, force: true });
  });

  it('masks secret-looking query parameters by name, and the service’s own secrets under any name and in the path', async () => {
    const plain = () => `plain-${randomBytes(12).toString('hex')}`;
    const secrets: string[] = [];
    const secret = (value: string) => (secrets.push(value), value);
    // [query sent, query logged]: `limit`, harmless, stays as it was.
    const byName: Array<[string, string]> = [
      'auth', 'bearer', 'credential', 'credentials', 'pw', 'pwd', 'pass', 'passwd', 'password', 'sig', 'signature',
      'session', 'session_id', 'cookie', 'access_token', 'api_key', 'apikey', 'API-Key', 'X-Api-Key', 'client_secret', 'code',
    ].map((name) => [`limit=5&${name}=${secret(plain())}`, `limit=5&${name}=${REDACTED}`]);
    const cases: Array<[string, string]> = [
      ...byName,
      [`authorization=Bearer%20${secret(plain())}`, `authorization=${REDACTED}`],
      // The rule applies to the decoded name: "%61uth" is "auth".
      [`%61uth=${secret(plain())}`, `auth=${REDACTED}`],
      // The service's own secrets under names that say nothing.
      [`limit=5&q=${encodeURIComponent(adminKey)}`, `limit=5&q=${REDACTED}`],
      [`filter=Bearer%20${secret(`svc_at_${plain()}`)}`, `filter=${REDACTED}`],
      [`next=${secret(`svc_rt_${plain()}`)}`, `next=${REDACTED}`],
      [`q=${secret(`svc_cs_${plain()}`)}`, `q=${REDACTED}`],
      [`x=${encodeURIComponent(secret(`whsec_${randomBytes(32).toString('base64')}`))}`, `x=${REDACTED}`],
      // …or as a bare name.
      [`${encodeURIComponent(adminKey)}&limit=5`, `${REDACTED}=&limit=5`],
    ];

    const ids: string[] = [];
    for (const [query] of cases) {
      const res = await fetch(`${base}/items?${query}`);
      await res.arrayBuffer();
      ids.push(res.headers.get('x-request-id')!);
    }
    for (const [i, [, logged]] of cases.entries()) {
      const line = await requestLine(ids[i]);
      expect({ msg: line.msg, url: line.req.url }).toEqual({ msg: 'request completed', url: `/items?${logged}` });
    }

    // …and in the path: a key pasted where an id belongs, encoded or not, on a route or none.
    const paths: Array<[string, string]> = [
      [`/keys/${adminKey}`, '/keys/[redacted]'],
      [`/nonexistent/${encodeURIComponent(adminKey).replace('s', '%73')}/x`, '/nonexistent/[redacted]/x'],
      [`/items/${secret(`svc_at_${plain()}`)}?limit=5`, '/items/[redacted]?limit=5'],
    ];
    for (const [path, logged] of paths) {
      const res = await fetch(`${base}${path}`, { headers: { authorization: `Bearer ${adminKey}` } });
      await res.arrayBuffer();
      const line = await requestLine(res.headers.get('x-request-id')!);
      expect(line.req.url).toBe(logged);
    }

    // …and a key sent as the request id is neither taken as it nor sent back: a new id stands in.
    const asId = await fetch(`${base}/items`, { headers: { authorization: `Bearer ${adminKey}`, 'x-request-id': adminKey } });
    await asId.arrayBuffer();
    expect(asId.headers.get('x-request-id')).toMatch(/^[0-9a-f-]{36}$/);
    await requestLine(asId.headers.get('x-request-id')!);

    const everything = service.stdout() + service.stderr();
    for (const s of [...secrets, adminKey.slice('svc_k1_'.length)]) expect(everything).not.toContain(s);
    expect(everything).not.toContain(encodeURIComponent(secrets.find((s) => s.startsWith('whsec_'))!));
  });

  it('logs a request its client abandoned before the answer as aborted, with no status (none was sent)', async () => {
    const id = `abort-${randomBytes(6).toString('hex')}`;
    const req = http.request(new URL('/blobs', base), {
      method: 'POST',
      agent: false,
      headers: { authorization: `Bearer ${adminKey}`, 'content-length': String(1024 * 1024), 'x-request-id': id },
    });
    req.on('error', () => undefined);
    req.write(randomBytes(200 * 1024));
    // The upload handler is running once its staging file exists; the client then goes away.
    await waitFor(async () => (await readdir(join(blobDir, '.staging')).catch(() => [])).length > 0, 'the upload to be staged');
    req.destroy();

    const line = await requestLine(id);
    expect(line).toEqual(expect.objectContaining({ level: 40, msg: 'request aborted', req: expect.objectContaining({ method: 'POST', url: '/blobs' }), res: { statusCode: null } }));
  });

  it('logs an unexpected error under the request\'s id, without the failed statement\'s values', async () => {
    const sql = new Client({ connectionString: `${PG_SERVER}/${db}` });
    await sql.connect();
    const secretTitle = `confidential-${randomBytes(8).toString('hex')}`;
    let res: Response;
    try {
      // A schema the service does not expect: every insert of an item fails in PostgreSQL.
      await sql.query(`ALTER TABLE items ADD CONSTRAINT audit_refuses CHECK (false) NOT VALID`);
      res = await fetch(`${base}/items`, {
        method: 'POST',
        headers: { authorization: `Bearer ${adminKey}`, 'content-type': 'application/json' },
        body: JSON.stringify({ type: 'core.note', properties: { title: secretTitle } }),
      });
      await res.arrayBuffer();
    } finally {
      await sql.query(`ALTER TABLE items DROP CONSTRAINT IF EXISTS audit_refuses`);
      await sql.end();
    }
    expect(res.status).toBe(500);
    const id = res.headers.get('x-request-id')!;
    const logged = await waitFor(() => records().find((r) => r.req?.id === id && r.msg === 'unhandled error'), 'the error line');
    expect(logged).toMatchObject({ level: 50, err: { type: 'QueryFailedError', parameters: '[redacted]' } });
    expect(service.stdout()).not.toContain(secretTitle);
  });

  it('logs an event stream its client left as closed, at info: that is how a stream ends', async () => {
    const id = `stream-${randomBytes(6).toString('hex')}`;
    const req = http.get(new URL('/events', base), { agent: false, headers: { authorization: `Bearer ${adminKey}`, 'x-request-id': id } });
    req.on('error', () => undefined);
    const res = await new Promise<http.IncomingMessage>((resolve) => req.on('response', resolve));
    expect(res.statusCode).toBe(200);
    req.destroy();
    const line = await requestLine(id);
    expect(line).toEqual(expect.objectContaining({ level: 30, msg: 'stream closed', req: expect.objectContaining({ method: 'GET', url: '/events' }), res: { statusCode: 200 } }));
  });

  it('logs a device’s polls while its user has not answered at info, and a bad device code at warn', async () => {
    const client = await fetch(`${base}/auth/clients`, {
      method: 'POST',
      headers: { authorization: `Bearer ${adminKey}`, 'content-type': 'application/json' },
      body: JSON.stringify({ client_name: 'TV', grant_types: ['urn:ietf:params:oauth:grant-type:device_code'], token_endpoint_auth_method: 'none', scope: 'openid' }),
    });
    expect(client.status).toBe(201);
    const clientId = ((await client.json()) as { client_id: string }).client_id;
    const form = (fields: Record<string, string>) => ({ method: 'POST', headers: { 'content-type': 'application/x-www-form-urlencoded' }, body: new URLSearchParams(fields) });
    const device = await fetch(`${base}/auth/device`, form({ client_id: clientId, scope: 'openid' }));
    expect(device.status).toBe(200);
    const { device_code } = (await device.json()) as { device_code: string };
    const poll = async (deviceCode: string) => {
      const res = await fetch(`${base}/auth/device/token`, form({ grant_type: 'urn:ietf:params:oauth:grant-type:device_code', device_code: deviceCode, client_id: clientId }));
      const line = await requestLine(res.headers.get('x-request-id')!);
      return [((await res.json()) as { error: string }).error, res.status, line.level];
    };
    expect(await poll(device_code)).toEqual(['authorization_pending', 400, 30]);
    expect(await poll(device_code)).toEqual(['slow_down', 400, 30]);
    expect(await poll('not-a-device-code')).toEqual(['invalid_grant', 400, 40]);
  });

  it('keeps stdout to JSON lines when a browser page calls the provider across origins (no notice of the provider\'s own)', async () => {
    const registered = await fetch(`${base}/auth/clients`, {
      method: 'POST',
      headers: { authorization: `Bearer ${adminKey}`, 'content-type': 'application/json' },
      body: JSON.stringify({ client_name: 'SPA', redirect_uris: ['https://spa.example/cb'], token_endpoint_auth_method: 'none', scope: 'openid' }),
    });
    expect(registered.status).toBe(201);
    const clientId = ((await registered.json()) as { client_id: string }).client_id;
    const res = await fetch(`${base}/auth/oauth2/token`, {
      method: 'POST',
      headers: { origin: 'https://spa.example', 'content-type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams({ grant_type: 'authorization_code', code: 'not-a-code', code_verifier: 'v'.repeat(43), redirect_uri: 'https://spa.example/cb', client_id: clientId }),
    });
    // The page's origin is let in (a public client's redirect URI's), to read the refusal.
    expect([res.status, res.headers.get('access-control-allow-origin')]).toEqual([400, 'https://spa.example']);
    await requestLine(res.headers.get('x-request-id')!);
    expect(service.stdout().split('\n').filter((l) => l && !l.startsWith('{'))).toEqual([]);
  });

  it('logs the provider\'s own warnings as JSON lines, not plain text on stderr', async () => {
    // A body the service read before the provider: the provider warns once that it was parsed upstream.
    const res = await fetch(`${base}/auth/oauth2/token`, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams({ grant_type: 'client_credentials', client_id: 'nobody', client_secret: 'nothing' }),
    });
    expect(res.status).toBe(400);
    const warning = await waitFor(() => records().find((r) => r.source === 'oidc-provider' && /already parsed request body/.test(r.msg)), 'the provider\'s warning');
    expect(warning.level).toBe(40);
    expect(service.stderr().split('\n').filter((l) => l.includes('oidc-provider'))).toEqual([]);
  });

  it('logs the requests refused before routing under the X-Request-Id they answer with, the URL masked', async () => {
    const cases: Array<[string, string, number, string | undefined]> = [
      ['a path not validly percent-encoded', `GET /items/%ZZ/${adminKey} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n`, 400, '/items/%ZZ/[redacted]'],
      ['an Expect other than 100-continue', 'GET /health?pw=hunter2 HTTP/1.1\r\nHost: x\r\nExpect: fancy\r\nConnection: close\r\n\r\n', 417, `/health?pw=${REDACTED}`],
      ['CONNECT', 'CONNECT 127.0.0.1:22 HTTP/1.1\r\nHost: 127.0.0.1:22\r\n\r\n', 400, '127.0.0.1:22'],
    ];
    for (const [name, bytes, status, url] of cases) {
      const res = await rawRequest(base, bytes);
      expect([name, res.status]).toEqual([name, status]);
      const id = /^x-request-id: (\S+)/im.exec(res.headers)![1];
      const line = await requestLine(id);
      expect([name, line.level, line.req.url, line.res.statusCode]).toEqual([name, 40, url, status]);
    }
    expect(service.stdout()).not.toContain(adminKey.slice('svc_k1_'.length));
    expect(service.stdout()).not.toContain('hunter2');
  });
});
