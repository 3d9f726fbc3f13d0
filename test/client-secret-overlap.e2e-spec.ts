/**
 * A client secret's rotation with an overlap (`POST /auth/clients/{client_id}/secret` with
 * `expire_previous_in`): the old secret keeps authenticating beside the new one (HTTP Basic and
 * form post, at the token and introspection endpoints), the tokens it gets, before or during the
 * overlap, and what they start are its own and end when the overlap ends, exactly as a rotation
 * without one ends them; a rotation during an overlap ends the older secret at once; 0 (the
 * default) is the rotation as it always was. Tokens are real client-credentials tokens.
 */
import { bearer, bootstrapAdmin, createTenant, startApp, TestApp } from './support/app';
import { badFields, expectError } from './support/envelope';
import { Receiver } from './support/receiver';
import { SseClient } from './support/sse';
import { waitFor } from './support/wait';

interface Client {
  client_id: string;
  client_secret: string;
}

describe('OAuth client secret rotation with an overlap (expire_previous_in)', () => {
  let t: TestApp;
  let root: string;
  let admin: string;
  let otherAdmin: string;

  beforeAll(async () => {
    t = await startApp();
    root = (await bootstrapAdmin(t)).key;
    admin = (await createTenant(t, root, 'acme')).key;
    otherAdmin = (await createTenant(t, root, 'other')).key;
  });
  afterAll(async () => t?.close());

  const serviceAccount = async (): Promise<Client> =>
    (await t.http.post('/auth/clients').set(bearer(admin)).send({ client_name: 'importer', grant_types: ['client_credentials'], scope: 'core.note:read core.note:write' }).expect(201))
      .body;
  const basic = (c: Client, secret: string) =>
    t.http.post('/auth/oauth2/token').auth(c.client_id, secret).type('form').send({ grant_type: 'client_credentials', scope: 'core.note:read core.note:write' });
  const post = (c: Client, secret: string) =>
    t.http.post('/auth/oauth2/token').type('form').send({ grant_type: 'client_credentials', scope: 'core.note:read', client_id: c.client_id, client_secret: secret });
  const tokenOf = async (c: Client, secret: string): Promise<string> => {
    const res = await basic(c, secret);
    if (res.status !== 200) throw new Error(`client_credentials: ${res.status} ${res.text}`);
    return res.body.access_token;
  };
  const refused = async (c: Client, secret: string) => {
    const res = await basic(c, secret);
    expect([res.status, res.body.error]).toEqual([401, 'invalid_client']);
  };
  const rotate = (c: Client, body?: object, key = admin) => {
    const req = t.http.post(`/auth/clients/${c.client_id}/secret`).set(bearer(key));
    return body === undefined ? req : req.send(body);
  };
  const introspect = (c: Client, secret: string, token: string) => t.http.post('/auth/oauth2/introspect').auth(c.client_id, secret).type('form').send({ token });
  const works = (token: string) => t.http.get('/items').set(bearer(token)).expect(200);
  const ends = async (token: string) => expectError(await t.http.get('/items').set(bearer(token)), 401, 'unauthorized');

  it('keeps the old secret authenticating beside the new one: both get tokens, which work, as does the old secret\'s token from before', async () => {
    const app = await serviceAccount();
    const before = await tokenOf(app, app.client_secret);
    const res = await rotate(app, { expire_previous_in: 60 }).expect(200);
    const secret = res.body.client_secret as string;
    expect(secret).toMatch(/^svc_cs_/);
    expect(secret).not.toBe(app.client_secret);
    const until = res.body.previous_secret_expires_at as string;
    expect(Date.parse(until)).toBeGreaterThan(Date.now());
    expect((await t.http.get(`/auth/clients/${app.client_id}`).set(bearer(admin)).expect(200)).body.previous_secret_expires_at).toBe(until);

    // Both secrets, by HTTP Basic and by form post.
    const old = await tokenOf(app, app.client_secret);
    const fresh = await tokenOf(app, secret);
    expect((await post(app, app.client_secret)).status).toBe(200);
    expect((await post(app, secret)).status).toBe(200);
    for (const token of [before, old, fresh]) await works(token);
    // Introspection authenticates with either, and sees each token active.
    expect((await introspect(app, app.client_secret, fresh).expect(200)).body).toMatchObject({ active: true });
    expect((await introspect(app, secret, old).expect(200)).body).toMatchObject({ active: true });
    // A wrong secret is still refused as before.
    await refused(app, 'svc_cs_wrong');
    // An update of the client during the overlap keeps both secrets (each written back sealed once).
    await t.http.patch(`/auth/clients/${app.client_id}`).set(bearer(admin)).send({ client_name: 'importer 2' }).expect(200);
    await works(await tokenOf(app, app.client_secret));
    await works(await tokenOf(app, secret));
    expect((await t.http.get(`/auth/clients/${app.client_id}`).set(bearer(admin)).expect(200)).body.previous_secret_expires_at).toBe(until);

    // Revocation too: the old secret revokes the token it got.
    await t.http.post('/auth/oauth2/revoke').auth(app.client_id, app.client_secret).type('form').send({ token: old }).expect(200);
    await ends(old);

    // Stored sealed, the previous one too.
    const [{ payload }] = await t.sql<{ payload: string }>(`SELECT payload::text FROM oidc_models WHERE model = 'Client' AND id = $1`, [app.client_id]);
    expect(payload).not.toContain(secret);
    expect(payload).not.toContain(app.client_secret);

    const audit = (await t.http.get('/audit?action=auth.client.secret_rotated').set(bearer(admin)).expect(200)).body.events.filter(
      (e: { client_id: string }) => e.client_id === app.client_id,
    );
    expect(audit.map((e: { details: object }) => e.details)).toEqual([expect.objectContaining({ expire_previous_in: 60 })]);
  });

  it('without expire_previous_in, or with 0, refuses the old secret and ends its tokens at once, as always', async () => {
    for (const body of [undefined, { expire_previous_in: 0 }]) {
      const app = await serviceAccount();
      const before = await tokenOf(app, app.client_secret);
      const res = await rotate(app, body).expect(200);
      expect(res.body.previous_secret_expires_at).toBeNull();
      await refused(app, app.client_secret);
      await ends(before);
      await works(await tokenOf(app, res.body.client_secret));
    }
  });

  it('a rotation during an overlap ends the older secret at once, with its tokens; 0 then ends the previous one too', async () => {
    const app = await serviceAccount();
    const first = app.client_secret;
    const second = (await rotate(app, { expire_previous_in: 60 }).expect(200)).body.client_secret as string;
    const underFirst = await tokenOf(app, first);
    const underSecond = await tokenOf(app, second);

    const third = (await rotate(app, { expire_previous_in: 60 }).expect(200)).body.client_secret as string;
    await refused(app, first);
    await ends(underFirst);
    expect((await introspect(app, third, underFirst).expect(200)).body).toEqual({ active: false });
    // The second is now the previous one: still good, as is what it got.
    await works(underSecond);
    await works(await tokenOf(app, second));
    await works(await tokenOf(app, third));

    const fourth = await rotate(app, { expire_previous_in: 0 }).expect(200);
    expect(fourth.body.previous_secret_expires_at).toBeNull();
    expect((await t.http.get(`/auth/clients/${app.client_id}`).set(bearer(admin)).expect(200)).body.previous_secret_expires_at).toBeNull();
    await refused(app, second);
    await refused(app, third);
    await ends(underSecond);
    await works(await tokenOf(app, fourth.body.client_secret));
  });

  it('when the overlap ends, refuses the old secret and ends what it got (tokens, webhooks, event streams); the new secret\'s tokens keep working', async () => {
    const app = await serviceAccount();
    const receiver = new Receiver();
    const base = await receiver.start();
    try {
      const before = await tokenOf(app, app.client_secret);
      const earlyHook = (await t.http.post('/webhooks').set(bearer(before)).send({ url: `${base}/before`, events: ['item.created'] }).expect(201)).body;
      await t.http.post('/webhooks').set(bearer(admin)).send({ url: `${base}/admin`, events: ['item.created'] }).expect(201);
      const { client_secret: secret } = (await rotate(app, { expire_previous_in: 2 }).expect(200)).body;
      // Got with the previous secret during the overlap: under that secret's credential, not the new one's.
      const during = await tokenOf(app, app.client_secret);
      const fresh = await tokenOf(app, secret);
      const lateHook = (await t.http.post('/webhooks').set(bearer(during)).send({ url: `${base}/during`, events: ['item.created'] }).expect(201)).body;
      const freshHook = (await t.http.post('/webhooks').set(bearer(fresh)).send({ url: `${base}/fresh`, events: ['item.created'] }).expect(201)).body;
      expect(lateHook.credential_id).toBe(earlyHook.credential_id);
      expect(freshHook.credential_id).not.toBe(earlyHook.credential_id);
      const stream = await SseClient.open(`${t.url}/events`, { authorization: `Bearer ${during}` });

      await waitFor(async () => (await basic(app, app.client_secret)).status === 401, 'the old secret refused once the overlap ended');
      await refused(app, app.client_secret);
      await ends(before);
      await ends(during);
      expect((await introspect(app, secret, during).expect(200)).body).toEqual({ active: false });
      await works(fresh);
      await works(await tokenOf(app, secret));
      expect((await t.http.get(`/auth/clients/${app.client_id}`).set(bearer(admin)).expect(200)).body.previous_secret_expires_at).toBeNull();

      const note = (await t.http.post('/items').set(bearer(admin)).send({ type: 'core.note', properties: { title: 'after the overlap' } }).expect(201)).body;
      const got = (path: string) => receiver.at(path).some((r) => JSON.parse(r.body).item?.id === note.id);
      await waitFor(() => got('/admin') && got('/fresh'), 'the deliveries to the admin\'s and the new secret\'s webhooks');
      await waitFor(() => stream.closed, 'the stream of the previous secret\'s token closing');
      expect(got('/before')).toBe(false);
      expect(got('/during')).toBe(false);
    } finally {
      await receiver.stop();
    }
  });

  it('refuses an expire_previous_in that is not a whole number of seconds from 0 to 604800 (400 validation_error naming it), rotating nothing', async () => {
    const app = await serviceAccount();
    for (const value of [-1, 604_801, 1.5, '60', null, true]) {
      expect(badFields(await rotate(app, { expire_previous_in: value }))).toEqual(['expire_previous_in']);
    }
    expect(badFields(await rotate(app, { expire_previous_in: 60, client_secret: 'mine' }))).toEqual(['client_secret']);
    await works(await tokenOf(app, app.client_secret));
    const longest = await rotate(app, { expire_previous_in: 604_800 }).expect(200);
    expect(Date.parse(longest.body.previous_secret_expires_at)).toBeGreaterThan(Date.now() + 6 * 24 * 3600 * 1000);
  });

  it('is 404 for another tenant\'s client, which keeps its secret alone', async () => {
    const app = await serviceAccount();
    expectError(await rotate(app, { expire_previous_in: 60 }, otherAdmin), 404, 'not_found');
    const mine = await rotate(app, { expire_previous_in: 60 }, root);
    expectError(mine, 404, 'not_found');
    await works(await tokenOf(app, app.client_secret));
    expect((await t.http.get(`/auth/clients/${app.client_id}`).set(bearer(admin)).expect(200)).body.previous_secret_expires_at).toBeNull();
  });

  it('documents expire_previous_in and previous_secret_expires_at in /openapi.json', async () => {
    const doc = (await t.http.get('/openapi.json').expect(200)).body;
    const schema = (ref: string) => doc.components.schemas[ref.split('/').pop()!];
    const op = doc.paths['/auth/clients/{client_id}/secret'].post;
    expect(schema(op.requestBody.content['application/json'].schema.$ref).properties.expire_previous_in).toMatchObject({ type: 'integer', minimum: 0, maximum: 604800 });
    const got = schema(doc.paths['/auth/clients/{client_id}'].get.responses['200'].content['application/json'].schema.$ref);
    expect(got.properties.previous_secret_expires_at).toBeDefined();
    expect(got.required).toContain('previous_secret_expires_at');
  });
});
