/**
 * SVC_ENCRYPTION_KEY against the secrets one database holds sealed: a key that does not open
 * them is refused at start (the process exits 1 with one line naming the variable) and by
 * `npm run oidc:rotate-key`; a new key with the old one in SVC_ENCRYPTION_KEY_PREVIOUS opens what
 * the old one sealed (signing keys, webhook and OAuth client secrets, kept idempotent responses); and
 * `npm run secrets:reseal` re-seals everything so that the old key can be dropped: those, a pending
 * device code's sealed id (the device page finds the code by its user code only by opening it) and a
 * connector's access and refresh tokens (a row sealed here as the callback seals it: no upstream here).
 *
 * The steps share one database, each starting where the one before left it.
 */
import { execFile } from 'node:child_process';
import { createHmac, randomBytes, randomUUID } from 'node:crypto';
import path from 'node:path';
import type { NestFastifyApplication } from '@nestjs/platform-fastify';
import { Client } from 'pg';
import request from 'supertest';
import { DataSource } from 'typeorm';
import { createApp } from '../src/app.factory';
import { StartupError } from '../src/common/startup-error';
import { loadConfig } from '../src/config/app-config';
import { SecretBox } from '../src/crypto/secret-box';
import { dataSourceOptions } from '../src/database/data-source-options';
import { tokenAad } from '../src/integrations/connections.service';
import { deviceJtiAad, SEALED_JTI, secretAad, storedTokenId } from '../src/oidc/oidc-adapter';
import { bearer, clearRedisPrefix, dropDatabase, PG_SERVER, REDIS_URL, testEnv, uniqueName } from './support/app';
import { ensureBuilt, freePort, ROOT, runService } from './support/process';
import { Receiver } from './support/receiver';
import { waitFor } from './support/wait';

const OLD_KEY = randomBytes(32).toString('hex');
const NEW_KEY = randomBytes(32).toString('base64');
const WRONG_KEY = randomBytes(32).toString('hex');

describe('the encryption key (e2e)', () => {
  const database = uniqueName('svc_enckey');
  const prefix = `${uniqueName('svcek')}:`;
  const shared = {
    NODE_ENV: 'test',
    DATABASE_URL: `${PG_SERVER}/${database}`,
    REDIS_URL,
    REDIS_PREFIX: prefix,
    HOST: '127.0.0.1',
    LOG_LEVEL: 'silent',
    RATE_LIMIT_ENABLED: 'false',
  };
  const receiver = new Receiver();
  let base: string;
  let sql: Client;
  let app: NestFastifyApplication | undefined;
  let http: ReturnType<typeof request>;
  let admin: string;
  let hook: { id: string; secret: string; path: string };
  let kids: string[];
  let client: { client_id: string; client_secret: string };
  const replay = { key: `enc-${randomBytes(4).toString('hex')}`, body: undefined as unknown };
  let device: { client_id: string; device_code: string; user_code: string };
  const connection = { tenantId: '', id: randomUUID(), access: `access-${randomBytes(8).toString('hex')}`, refresh: `refresh-${randomBytes(8).toString('hex')}` };

  /** Starts the service in this process on the shared database; the one before is stopped first. */
  async function serve(keys: Record<string, string>): Promise<void> {
    await app?.close();
    app = undefined;
    const port = String(await freePort());
    const config = loadConfig(testEnv({ ...shared, ...keys, PORT: port, SVC_BASE_URL: `http://127.0.0.1:${port}` }));
    app = await createApp(config);
    await app.listen(config.PORT, '127.0.0.1');
    http = request(`http://127.0.0.1:${port}`);
  }

  /** A start that must fail, in this process: its error. */
  async function refused(keys: Record<string, string>): Promise<Error> {
    await app?.close();
    app = undefined;
    const config = loadConfig(testEnv({ ...shared, ...keys, PORT: String(await freePort()) }));
    return createApp(config).then(
      (started) => {
        app = started;
        throw new Error('started');
      },
      (err: Error) => err,
    );
  }

  /** Runs a compiled script (as its npm script does) against the shared database. */
  function script(file: string, keys: Record<string, string>): Promise<{ code: number; stdout: string; stderr: string }> {
    return new Promise((resolve) => {
      execFile(
        process.execPath,
        [path.join(ROOT, 'dist', 'src', file)],
        { cwd: ROOT, env: { PATH: process.env.PATH ?? '', ...shared, ...keys }, timeout: 60_000 },
        (err, stdout, stderr) => resolve({ code: err ? Number((err as { code?: number }).code ?? 1) : 0, stdout, stderr }),
      );
    });
  }

  /** The service's own SecretBox under these keys alone. Its DataSource is never queried: it is read only when no key is given. */
  function box(keys: Record<string, string>): SecretBox {
    const config = loadConfig(testEnv({ ...shared, ...keys }));
    return new SecretBox(config, new DataSource(dataSourceOptions(config)));
  }

  /** The connection row's tokens, as the given keys alone open them (undefined: they do not). */
  async function connectionTokens(keys: Record<string, string>): Promise<Array<string | undefined>> {
    const [row] = (await sql.query(`SELECT access_token_sealed, refresh_token_sealed FROM connections WHERE tenant_id = $1 AND id = $2`, [connection.tenantId, connection.id])).rows;
    const secrets = box(keys);
    return [
      (await secrets.tryOpen(row.access_token_sealed, tokenAad(connection.tenantId, connection.id, 'access')))?.plaintext,
      (await secrets.tryOpen(row.refresh_token_sealed, tokenAad(connection.tenantId, connection.id, 'refresh')))?.plaintext,
    ];
  }

  const count = async (text: string) => Number((await sql.query(text)).rows[0].n);
  const jwksKids = async () => ((await http.get('/auth/jwks').expect(200)).body.keys as Array<{ kid: string }>).map((k) => k.kid);

  /** An OAuth client_credentials grant, with the client secret sealed under the old key. */
  async function clientCredentials(): Promise<void> {
    const res = await http.post('/auth/token').auth(client.client_id, client.client_secret).type('form').send({ grant_type: 'client_credentials', scope: 'core.note:read' });
    expect(res.status).toBe(200);
  }

  /** Creates an item; resolves with the delivery its webhook receives, checked against the secret made under the old key. */
  async function signedDelivery(title: string): Promise<void> {
    await http.post('/items').set(bearer(admin)).send({ type: 'core.note', properties: { title } }).expect(201);
    const req = await waitFor(() => receiver.at(hook.path).find((r) => r.body.includes(title)), `the delivery of ${title}`);
    const [, t, v1] = /^t=(\d+),v1=([0-9a-f]{64})/.exec(String(req.headers['x-svc-signature']))!;
    expect(createHmac('sha256', hook.secret).update(`${t}.${req.body}`).digest('hex')).toBe(v1);
  }

  beforeAll(async () => {
    ensureBuilt();
    base = await receiver.start();
    await serve({ SVC_ENCRYPTION_KEY: OLD_KEY });
    sql = new Client({ connectionString: shared.DATABASE_URL });
    await sql.connect();
    const root = (await http.post('/keys').send({ label: 'root admin' }).expect(201)).body;
    admin = root.key;
    const created = await http.post('/webhooks').set(bearer(admin)).send({ url: `${base}/enc`, events: ['item.created'] }).expect(201);
    hook = { id: created.body.id, secret: created.body.secret, path: '/enc' };
    kids = await jwksKids();
    client = (
      await http.post('/auth/clients').set(bearer(admin)).send({ client_name: 'importer', grant_types: ['client_credentials'], scope: 'core.note:read' }).expect(201)
    ).body;
    await clientCredentials();
    replay.body = (
      await http.post('/items').set(bearer(admin)).set('Idempotency-Key', replay.key).send({ type: 'core.note', properties: { title: 'kept' } }).expect(201)
    ).body;
    await signedDelivery('under the old key');
    // A device authorization left pending: its device code's id is kept sealed in its row.
    const tv = (
      await http
        .post('/auth/clients')
        .set(bearer(admin))
        .send({ client_name: 'Kitchen TV', grant_types: ['urn:ietf:params:oauth:grant-type:device_code'], token_endpoint_auth_method: 'none', scope: 'openid' })
        .expect(201)
    ).body;
    device = { client_id: tv.client_id, ...(await http.post('/auth/device').type('form').send({ client_id: tv.client_id, scope: 'openid' }).expect(200)).body };
    // A connection as the OAuth callback stores one (connections.service.ts), its tokens sealed under the old key.
    const integration = await http
      .post('/integrations')
      .set(bearer(admin))
      .send({
        manifest: {
          name: 'acme.tasks',
          version: '1.0.0',
          publisher: 'Acme Inc.',
          direction: 'read',
          runtime_compatibility: ['svc>=4.2'],
          oauth: { authorize_url: 'https://auth.acme.example/authorize', token_url: 'https://auth.acme.example/token', scopes: ['tasks.read'], client_id: 'svc-connector' },
          target_types: ['core.task'],
          permissions: ['core.task:write'],
        },
      })
      .expect(201);
    connection.tenantId = root.tenant_id;
    const sealer = box({ SVC_ENCRYPTION_KEY: OLD_KEY });
    await sql.query(
      `INSERT INTO connections (tenant_id, id, integration_id, provider, access_token_sealed, refresh_token_sealed, token_type, created_by)
       VALUES ($1, $2, $3, 'acme.tasks', $4, $5, 'Bearer', $6)`,
      [
        connection.tenantId,
        connection.id,
        integration.body.id,
        await sealer.seal(connection.access, tokenAad(connection.tenantId, connection.id, 'access')),
        await sealer.seal(connection.refresh, tokenAad(connection.tenantId, connection.id, 'refresh')),
        root.id,
      ],
    );
    await app!.close();
    app = undefined;
  }, 180_000);

  afterAll(async () => {
    await app?.close();
    await sql?.end();
    await receiver.stop();
    await dropDatabase(database);
    await clearRedisPrefix(prefix);
  });

  it('refuses to start with a key that does not open the stored secrets: exit 1, one line naming SVC_ENCRYPTION_KEY', async () => {
    const s = runService({ ...shared, PORT: String(await freePort()), SVC_ENCRYPTION_KEY: WRONG_KEY });
    let ended: { code: number | null } | undefined;
    void s.exited.then((e) => (ended = e));
    const { code } = await waitFor(() => ended, 'the refused start to end', 30_000).finally(() => s.stop());
    const lines = s.stderr().split('\n').filter((l) => l.trim() !== '');
    expect(code).toBe(1);
    expect(lines).toEqual([
      `svc: SVC_ENCRYPTION_KEY does not open the secrets stored in ${shared.DATABASE_URL} (sealed under another key); start with the key they were sealed with, or list the old one in SVC_ENCRYPTION_KEY_PREVIOUS`,
    ]);
  }, 60_000);

  it('refuses, with SVC_ENCRYPTION_KEY unset, rather than generating a key that opens nothing', async () => {
    const err = await refused({});
    expect(err).toBeInstanceOf(StartupError);
    expect(err.message).toMatch(/^SVC_ENCRYPTION_KEY is unset, but .* holds secrets sealed under a key; start with SVC_ENCRYPTION_KEY set/);
    expect(await count(`SELECT count(*) AS n FROM service_keys WHERE name = 'encryption'`)).toBe(0);
  });

  it('checks a database with no key check yet against a secret it holds, and keeps the check once a key passes', async () => {
    await sql.query(`DELETE FROM service_keys WHERE name = 'encryption-check'`);
    expect((await refused({ SVC_ENCRYPTION_KEY: WRONG_KEY })).message).toMatch(/^SVC_ENCRYPTION_KEY does not open the secrets stored in/);
    expect(await count(`SELECT count(*) AS n FROM service_keys WHERE name = 'encryption-check'`)).toBe(0);
    await serve({ SVC_ENCRYPTION_KEY: OLD_KEY });
    expect(await count(`SELECT count(*) AS n FROM service_keys WHERE name = 'encryption-check'`)).toBe(1);
    await app!.close();
    app = undefined;
  });

  it('oidc:rotate-key with a key that does not open the stored secrets, or none, exits non-zero and adds no signing key', async () => {
    const before = await count(`SELECT count(*) AS n FROM oidc_signing_keys`);
    const wrong = await script('oidc/rotate-signing-key.js', { SVC_ENCRYPTION_KEY: WRONG_KEY });
    expect(wrong.code).not.toBe(0);
    expect(wrong.stderr).toMatch(/^oidc:rotate-key: SVC_ENCRYPTION_KEY does not open the secrets stored in .*; nothing was rotated\n$/);
    const unset = await script('oidc/rotate-signing-key.js', {});
    expect(unset.code).not.toBe(0);
    expect(unset.stderr).toMatch(/^oidc:rotate-key: SVC_ENCRYPTION_KEY is unset, but/);
    expect(await count(`SELECT count(*) AS n FROM oidc_signing_keys`)).toBe(before);
    expect(await count(`SELECT count(*) AS n FROM service_keys WHERE name = 'encryption'`)).toBe(0);
  });

  it('with a new key and the old one in SVC_ENCRYPTION_KEY_PREVIOUS: the old signing keys, webhook secret and kept responses still open', async () => {
    await serve({ SVC_ENCRYPTION_KEY: NEW_KEY, SVC_ENCRYPTION_KEY_PREVIOUS: `${WRONG_KEY},${OLD_KEY}` });
    expect(await jwksKids()).toEqual(kids);
    await http.get('/.well-known/openid-configuration').expect(200);
    await clientCredentials();
    await signedDelivery('under the new key, the old one previous');
    const again = await http.post('/items').set(bearer(admin)).set('Idempotency-Key', replay.key).send({ type: 'core.note', properties: { title: 'kept' } });
    expect(again.status).toBe(201);
    expect(again.body).toEqual(replay.body);
  });

  it('secrets:reseal re-seals every stored secret under the current key, counts them, and changes nothing when run again; then the old key can go', async () => {
    const keys = { SVC_ENCRYPTION_KEY: NEW_KEY, SVC_ENCRYPTION_KEY_PREVIOUS: OLD_KEY };
    const first = await script('crypto/reseal-secrets.js', keys);
    expect(first).toMatchObject({ code: 0, stderr: '' });
    expect(first.stdout).toContain(`OIDC signing keys: ${kids.length} stored, ${kids.length} re-sealed`);
    expect(first.stdout).toContain('webhook secrets: 1 stored, 1 re-sealed');
    expect(first.stdout).toContain('key check: 1 stored, 1 re-sealed');
    expect(first.stdout).toContain('OAuth client secrets: 1 stored, 1 re-sealed');
    expect(first.stdout).toContain('OAuth device codes: 1 stored, 1 re-sealed');
    expect(first.stdout).toContain('connector access tokens: 1 stored, 1 re-sealed');
    expect(first.stdout).toContain('connector refresh tokens: 1 stored, 1 re-sealed');
    expect(first.stdout).toMatch(/keep SVC_ENCRYPTION_KEY_PREVIOUS until \S+ for their replays/);
    const second = await script('crypto/reseal-secrets.js', keys);
    expect(second.code).toBe(0);
    expect(second.stdout).not.toMatch(/[1-9]\d* re-sealed/);

    await serve({ SVC_ENCRYPTION_KEY: NEW_KEY });
    expect(await jwksKids()).toEqual(kids);
    await signedDelivery('under the new key alone');
    await clientCredentials();
    // The device page finds the code by its user code, which opens the sealed id (500 when no key does). A poll finds it by its
    // value and opens nothing: it answers authorization_pending either way, so it only shows the code still waits.
    const page = await http.get('/auth/device').query({ user_code: device.user_code });
    expect(page.status).toBe(200);
    expect(page.text).toContain('Kitchen TV');
    const poll = await http.post('/auth/device/token').type('form').send({ grant_type: 'urn:ietf:params:oauth:grant-type:device_code', device_code: device.device_code, client_id: device.client_id });
    expect([poll.status, poll.body.error]).toEqual([400, 'authorization_pending']);
    expect(await connectionTokens({ SVC_ENCRYPTION_KEY: NEW_KEY })).toEqual([connection.access, connection.refresh]);
    // And the old key alone no longer opens them.
    expect(await connectionTokens({ SVC_ENCRYPTION_KEY: OLD_KEY })).toEqual([undefined, undefined]);
    expect((await refused({ SVC_ENCRYPTION_KEY: OLD_KEY })).message).toMatch(/^SVC_ENCRYPTION_KEY does not open the secrets stored in/);
  });

  it('a device code or client secret sealed under a key no longer configured is unknown (the wrong-code page, invalid_client), not a 500', async () => {
    await serve({ SVC_ENCRYPTION_KEY: NEW_KEY });
    const tv = (
      await http
        .post('/auth/clients')
        .set(bearer(admin))
        .send({ client_name: 'Hall TV', grant_types: ['urn:ietf:params:oauth:grant-type:device_code'], token_endpoint_auth_method: 'none', scope: 'openid' })
        .expect(201)
    ).body;
    const pending = (await http.post('/auth/device').type('form').send({ client_id: tv.client_id, scope: 'openid' }).expect(200)).body;
    const importer = (
      await http.post('/auth/clients').set(bearer(admin)).send({ client_name: 'exporter', grant_types: ['client_credentials'], scope: 'core.note:read' }).expect(201)
    ).body;
    // As if sealed under the old key and left there: SVC_ENCRYPTION_KEY_PREVIOUS dropped before secrets:reseal ran.
    const old = box({ SVC_ENCRYPTION_KEY: OLD_KEY });
    const codeRow = storedTokenId(pending.device_code);
    await sql.query(`UPDATE oidc_models SET payload = jsonb_set(payload, $2, to_jsonb($3::text)) WHERE model = 'DeviceCode' AND id = $1`, [
      codeRow,
      `{${SEALED_JTI}}`,
      await old.seal(pending.device_code, deviceJtiAad(codeRow)),
    ]);
    const [{ n: resealed }] = (
      await sql.query(`UPDATE oidc_models SET payload = jsonb_set(payload, '{client_secret}', to_jsonb($2::text)) WHERE model = 'Client' AND id = $1 RETURNING 1 AS n`, [
        importer.client_id,
        await old.seal(importer.client_secret, secretAad(importer.client_id)),
      ])
    ).rows;
    expect(resealed).toBe(1);

    const wrong = await http.get('/auth/device').query({ user_code: 'BCD-FGHJ' });
    const page = await http.get('/auth/device').query({ user_code: pending.user_code });
    // The same page as for a code never issued, but for the code it keeps in the box to correct.
    expect([page.status, page.text.replace(`value="${pending.user_code}"`, 'value="BCD-FGHJ"')]).toEqual([wrong.status, wrong.text]);
    expect(page.status).toBe(400);
    const submitted = await http.post('/auth/device/consent').type('form').send({ user_code: pending.user_code, decision: 'approve' });
    expect(submitted.status).toBe(400);
    const token = await http.post('/auth/token').auth(importer.client_id, importer.client_secret).type('form').send({ grant_type: 'client_credentials', scope: 'core.note:read' });
    expect([token.status, token.body.error]).toEqual([401, 'invalid_client']);
    // The clients sealed under the current key are untouched.
    await clientCredentials();
  });
});
