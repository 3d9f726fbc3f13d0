/**
 * The URLs a registrant gives that the provider itself would call (provider-fetch.ts): a
 * `sector_identifier_uri` is refused at registration without being fetched, and a `jwks_uri`
 * reaches what a webhook may and no more (no private address unless
 * WEBHOOK_ALLOW_PRIVATE_TARGETS, no redirect, at most MAX_JWKS_BYTES), checked before any
 * connection is made. Real sockets count what reached them.
 */
import { createServer } from 'node:http';
import { AddressInfo, createServer as createTcpServer, Socket } from 'node:net';
import { randomUUID, webcrypto } from 'node:crypto';
import * as oidc from 'openid-client';
import { MAX_ASSERTION_LIFETIME_S } from '../src/oidc/provider-client-auth';
import { MAX_JWKS_BYTES } from '../src/oidc/provider-fetch';
import { bearer, bootstrapAdmin, startApp, TestApp } from './support/app';
import { badFields, expectError } from './support/envelope';
import { Receiver } from './support/receiver';
import { waitFor } from './support/wait';

/** A TCP listener that only counts the connections it gets (and holds them open, as a filtered host would). */
async function countingListener(): Promise<{ port: number; connections: () => number; close: () => Promise<void> }> {
  const sockets = new Set<Socket>();
  let count = 0;
  const server = createTcpServer((socket) => {
    count++;
    sockets.add(socket);
    socket.on('error', () => undefined);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    port: (server.address() as AddressInfo).port,
    connections: () => count,
    close: () => {
      for (const socket of sockets) socket.destroy();
      return new Promise((resolve) => server.close(() => resolve()));
    },
  };
}

async function keyPair() {
  const keys = (await webcrypto.subtle.generateKey({ name: 'RSASSA-PKCS1-v1_5', modulusLength: 2048, publicExponent: new Uint8Array([1, 0, 1]), hash: 'SHA-256' }, true, [
    'sign',
    'verify',
  ])) as webcrypto.CryptoKeyPair;
  const publicJwk = { ...(await webcrypto.subtle.exportKey('jwk', keys.publicKey)), kid: 'app-key', alg: 'RS256', use: 'sig' };
  return { privateKey: keys.privateKey, publicJwk };
}

/** A relying party of `t` authenticating as `clientId` with private_key_jwt. */
const relyingParty = (t: TestApp, clientId: string, privateKey: webcrypto.CryptoKey) =>
  oidc.discovery(new URL(t.url), clientId, undefined, oidc.PrivateKeyJwt({ key: privateKey, kid: 'app-key' }), { execute: [oidc.allowInsecureRequests] });

/** Whether the client authenticates (introspection answers) or is refused (invalid_client). */
async function authenticates(party: oidc.Configuration): Promise<boolean> {
  try {
    await oidc.tokenIntrospection(party, 'svc_at_not-a-token');
    return true;
  } catch (err) {
    if ((err as { error?: string }).error === 'invalid_client') return false;
    throw err;
  }
}

describe('URLs the provider would fetch for a registrant', () => {
  const closers: Array<() => Promise<unknown>> = [];
  afterAll(async () => {
    for (const close of closers.reverse()) await close();
  });
  it('refuses a sector_identifier_uri at registration without fetching it', async () => {
    const t = await startApp();
    closers.push(() => t.close());
    const listener = await countingListener();
    closers.push(listener.close);
    const res = await t.http
      .post('/auth/oauth2/register')
      .send({ redirect_uris: ['https://app.example/cb'], sector_identifier_uri: `https://127.0.0.1:${listener.port}/sector` });
    expect([res.status, res.body.error]).toEqual([400, 'invalid_client_metadata']);
    expect(res.body.error_description).toContain('sector_identifier_uri');
    expect(listener.connections()).toBe(0);
  });

  it('never connects to a private jwks_uri when private targets are off, by address or by name', async () => {
    const t = await startApp({ WEBHOOK_ALLOW_PRIVATE_TARGETS: 'false' });
    closers.push(() => t.close());
    const listener = await countingListener();
    closers.push(listener.close);
    const { privateKey, publicJwk } = await keyPair();
    for (const host of ['127.0.0.1', 'localhost']) {
      const registered = await t.http
        .post('/auth/oauth2/register')
        .send({ redirect_uris: ['https://app.example/cb'], token_endpoint_auth_method: 'private_key_jwt', jwks_uri: `https://${host}:${listener.port}/jwks` })
        .expect(201);
      expect([host, await authenticates(await relyingParty(t, registered.body.client_id, privateKey))]).toEqual([host, false]);
    }
    expect(listener.connections()).toBe(0);
    // The same client with its keys inline authenticates: the refusal is the URL's.
    const inline = await t.http
      .post('/auth/oauth2/register')
      .send({ redirect_uris: ['https://app.example/cb'], token_endpoint_auth_method: 'private_key_jwt', jwks: { keys: [publicJwk] } })
      .expect(201);
    expect(await authenticates(await relyingParty(t, inline.body.client_id, privateKey))).toBe(true);
  });

  it('fetches a jwks_uri it may reach, but follows no redirect and takes no key set past the limit', async () => {
    const t = await startApp();
    closers.push(() => t.close());
    const { privateKey, publicJwk } = await keyPair();
    const keySet = JSON.stringify({ keys: [publicJwk] });
    const served: string[] = [];
    const jwksServer = createServer((req, res) => {
      served.push(req.url!);
      if (req.url === '/moved') return res.writeHead(302, { Location: '/jwks' }).end();
      if (req.url === '/huge') return res.writeHead(200, { 'Content-Type': 'application/json' }).end(`{"keys":[${JSON.stringify(publicJwk)}],"pad":"${'x'.repeat(MAX_JWKS_BYTES)}"}`);
      res.writeHead(200, { 'Content-Type': 'application/json' }).end(keySet);
    });
    await new Promise<void>((resolve) => jwksServer.listen(0, '127.0.0.1', resolve));
    closers.push(() => new Promise((resolve) => jwksServer.close(resolve)));
    const base = `http://127.0.0.1:${(jwksServer.address() as AddressInfo).port}`;
    const outcome: Record<string, boolean> = {};
    for (const path of ['/jwks', '/moved', '/huge']) {
      const registered = await t.http
        .post('/auth/oauth2/register')
        .send({ redirect_uris: ['https://app.example/cb'], token_endpoint_auth_method: 'private_key_jwt', jwks_uri: `${base}${path}` })
        .expect(201);
      outcome[path] = await authenticates(await relyingParty(t, registered.body.client_id, privateKey));
    }
    expect(outcome).toEqual({ '/jwks': true, '/moved': false, '/huge': false });
    // The redirect was answered, and not followed.
    expect(served.filter((url) => url === '/jwks')).toHaveLength(1);
  });

  it('refuses a client assertion made to last longer than MAX_ASSERTION_LIFETIME_S, or issued in the future', async () => {
    const t = await startApp();
    closers.push(() => t.close());
    const { privateKey, publicJwk } = await keyPair();
    const client = (
      await t.http.post('/auth/oauth2/register').send({ redirect_uris: ['https://app.example/cb'], token_endpoint_auth_method: 'private_key_jwt', jwks: { keys: [publicJwk] } }).expect(201)
    ).body.client_id as string;
    const now = Math.floor(Date.now() / 1000);
    const assertion = async (claims: Record<string, number>) => {
      const part = (value: object) => Buffer.from(JSON.stringify(value)).toString('base64url');
      const input = `${part({ alg: 'RS256', kid: 'app-key' })}.${part({ iss: client, sub: client, aud: `${t.url}/auth/oauth2/introspect`, jti: randomUUID(), iat: now, ...claims })}`;
      const signature = await webcrypto.subtle.sign('RSASSA-PKCS1-v1_5', privateKey, Buffer.from(input));
      return `${input}.${Buffer.from(signature).toString('base64url')}`;
    };
    /** Whether the client authenticates with an assertion of `claims` (introspection answers), or the error it gets. */
    const introspect = async (claims: Record<string, number>) => {
      const res = await t.http
        .post('/auth/oauth2/introspect')
        .type('form')
        .send({ token: 'svc_at_not-a-token', client_id: client, client_assertion_type: 'urn:ietf:params:oauth:client-assertion-type:jwt-bearer', client_assertion: await assertion(claims) });
      return res.status === 200 ? 'authenticated' : res.body.error;
    };
    expect({
      minute: await introspect({ exp: now + 60 }),
      atTheLimit: await introspect({ exp: now + MAX_ASSERTION_LIFETIME_S }),
      year: await introspect({ exp: now + 365 * 24 * 3600 }),
      // Within the lifetime, but issued two minutes from now: the provider reads iat only without exp.
      future: await introspect({ iat: now + 120, exp: now + 180 }),
    }).toEqual({ minute: 'authenticated', atTheLimit: 'authenticated', year: 'invalid_client', future: 'invalid_client' });
    // Only the assertions taken are kept against replay: none for a year.
    const [{ latest }] = await t.sql<{ latest: Date }>(`SELECT max(expires_at) AS latest FROM oidc_models WHERE model = 'ReplayDetection'`);
    expect(latest.getTime()).toBeLessThan((now + MAX_ASSERTION_LIFETIME_S + 60) * 1000);
  });

  it('lets an admin register a private_key_jwt client by its jwks_uri (no secret), and remove a jwks_uri an open client named', async () => {
    const t = await startApp();
    closers.push(() => t.close());
    const admin = (await bootstrapAdmin(t)).key;
    const { privateKey, publicJwk } = await keyPair();
    const jwksServer = createServer((_req, res) => res.writeHead(200, { 'Content-Type': 'application/json' }).end(JSON.stringify({ keys: [publicJwk] })));
    await new Promise<void>((resolve) => jwksServer.listen(0, '127.0.0.1', resolve));
    closers.push(() => new Promise((resolve) => jwksServer.close(resolve)));
    const jwksUri = `http://127.0.0.1:${(jwksServer.address() as AddressInfo).port}/jwks`;

    const client = (
      await t.http
        .post('/auth/clients')
        .set(bearer(admin))
        .send({ client_name: 'keyed importer', grant_types: ['client_credentials'], token_endpoint_auth_method: 'private_key_jwt', jwks_uri: jwksUri, scope: 'core.note:read' })
        .expect(201)
    ).body;
    expect(client).toMatchObject({ token_endpoint_auth_method: 'private_key_jwt', jwks_uri: jwksUri });
    expect(client).not.toHaveProperty('client_secret');
    const tokens = await oidc.clientCredentialsGrant(await relyingParty(t, client.client_id, privateKey), { scope: 'core.note:read' });
    await t.http.get('/items').set(bearer(tokens.access_token)).expect(200);
    expectError(await t.http.post(`/auth/clients/${client.client_id}/secret`).set(bearer(admin)), 409, 'conflict');
    // Its keys are what it authenticates with: they cannot be taken away, nor the method left without them.
    const unkeyed = [
      await t.http.patch(`/auth/clients/${client.client_id}`).set(bearer(admin)).send({ jwks_uri: null }),
      await t.http.post('/auth/clients').set(bearer(admin)).send({ grant_types: ['client_credentials'], token_endpoint_auth_method: 'private_key_jwt' }),
    ];
    for (const res of unkeyed) expect(badFields(res)).toEqual(['jwks_uri']);

    // Moving its keys is its rotation: the tokens it got before end, and what they started (a
    // webhook gets nothing more); the keys at the new place work.
    const receiver = new Receiver();
    const base = await receiver.start();
    closers.push(() => receiver.stop());
    await t.http.post('/webhooks').set(bearer(tokens.access_token)).send({ url: `${base}/client`, events: ['item.created'] }).expect(201);
    await t.http.post('/webhooks').set(bearer(admin)).send({ url: `${base}/admin`, events: ['item.created'] }).expect(201);
    const note = async () => (await t.http.post('/items').set(bearer(admin)).send({ type: 'core.note', properties: { title: 'n' } }).expect(201)).body.id as string;
    const deliveredTo = (path: string, id: string) => receiver.at(path).some((r) => JSON.parse(r.body).item.id === id);
    const before = await note();
    await waitFor(() => deliveredTo('/client', before) && deliveredTo('/admin', before), 'the deliveries before the move');
    await t.http.patch(`/auth/clients/${client.client_id}`).set(bearer(admin)).send({ jwks_uri: `${jwksUri}?moved` }).expect(200);
    expectError(await t.http.get('/items').set(bearer(tokens.access_token)), 401, 'unauthorized');
    const after = await note();
    await waitFor(() => deliveredTo('/admin', after), 'the admin webhook\'s delivery');
    expect(receiver.at('/client')).toHaveLength(1);
    const moved = await oidc.clientCredentialsGrant(await relyingParty(t, client.client_id, privateKey), { scope: 'core.note:read' });
    await t.http.get('/items').set(bearer(moved.access_token)).expect(200);

    // An openly registered client named a jwks_uri it does not need: the operators remove it.
    const open = (await t.http.post('/auth/oauth2/register').send({ redirect_uris: ['https://app.example/cb'], jwks_uri: jwksUri }).expect(201)).body;
    const changed = await t.http.patch(`/auth/clients/${open.client_id}`).set(bearer(admin)).send({ jwks_uri: null }).expect(200);
    expect(changed.body).not.toHaveProperty('jwks_uri');
    expect((await t.http.get(`/auth/clients/${open.client_id}`).set(bearer(admin)).expect(200)).body).not.toHaveProperty('jwks_uri');
  });
});
