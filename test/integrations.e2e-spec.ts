/**
 * The integration manifest registry (SPEC 2.6, 4.4; CONTRACT "Integrations"): the root tenant's
 * admins register manifests, validated field by field; every credential lists and reads them.
 */
import { bearer, bootstrapAdmin, createKey, createTenant, startApp, TestApp } from './support/app';
import { expectLocation, expectReplayed } from './support/created';
import { badFields, expectError } from './support/envelope';

const manifest = (over: Record<string, unknown> = {}) => ({
  name: 'acme.tasks',
  version: '1.0.0',
  publisher: 'Acme Inc.',
  direction: 'read',
  runtime_compatibility: ['svc>=4.2'],
  triggers: [{ kind: 'schedule', schedule: 'every 15 minutes' }],
  oauth: { authorize_url: 'https://auth.acme.example/authorize', token_url: 'https://auth.acme.example/token', scopes: ['tasks.read'], client_id: 'svc-connector' },
  webhook_verification: { scheme: 'hmac-sha256', header: 'X-Acme-Signature' },
  target_types: ['core.task'],
  permissions: ['core.task:write', 'metadata:write'],
  ...over,
});

/** A builder of manifests named `name` with these OAuth URLs. */
const oauthManifest = (name: string) => (authorize_url: string, token_url: string) => manifest({ name, oauth: { authorize_url, token_url, client_id: 'svc' } });

describe('integrations', () => {
  let t: TestApp;
  let root: string;
  let member: string;
  let otherAdmin: string;

  beforeAll(async () => {
    t = await startApp();
    root = (await bootstrapAdmin(t)).key;
    member = (await createKey(t, root, { label: 'member', role: 'member' })).key;
    otherAdmin = (await createTenant(t, root)).key;
  });
  afterAll(async () => t?.close());

  const register = (key: string, body: unknown) => t.http.post('/integrations').set(bearer(key)).send(body as object);

  it('registers a manifest for a root-tenant admin and answers the full record with a summary', async () => {
    const res = await register(root, { manifest: manifest() });
    expect(res.status).toBe(201);
    expect(res.body).toEqual({
      id: expect.any(String),
      manifest_name: 'acme.tasks',
      manifest_version: '1.0.0',
      publisher: 'Acme Inc.',
      direction: 'read',
      runtime_compatibility: ['svc>=4.2'],
      registered_at: expect.stringMatching(/Z$/),
      manifest: manifest(),
      summary: expect.stringContaining('acme.tasks 1.0.0 by Acme Inc.'),
    });
    expect(res.body.summary).toContain('core.task:write');
    expect(res.body.summary).toContain('auth.acme.example');
    expect(res.body.summary).toContain('runs every 15 minutes');
    const read = await t.http.get(`/integrations/${res.body.id}`).set(bearer(otherAdmin)).expect(200);
    expect(read.body).toEqual(res.body);
  });

  it('takes a new version as a new record and refuses the same version twice (409)', async () => {
    expect((await register(root, { manifest: manifest({ version: '1.1.0' }) })).status).toBe(201);
    expectError(await register(root, { manifest: manifest({ version: '1.1.0', publisher: 'Someone else' }) }), 409, 'conflict');
  });

  it('names every bad manifest field', async () => {
    const bad = manifest({
      name: 'Not A Name',
      version: 'one',
      direction: 'sideways',
      runtime_compatibility: [],
      oauth: { authorize_url: 'http://insecure.example/a', token_url: 'https://x.example/t' },
      permissions: ['core.task:delete'],
      extra: true,
    });
    delete (bad as Record<string, unknown>).publisher;
    const fields = badFields(await register(root, { manifest: bad }));
    expect(fields).toEqual(
      expect.arrayContaining(['manifest.name', 'manifest.version', 'manifest.direction', 'manifest.runtime_compatibility', 'manifest.oauth.authorize_url', 'manifest.publisher', 'manifest.extra']),
    );
    expect(badFields(await register(root, { manifest: manifest({ permissions: ['core.task:delete'], target_types: ['Bad Type'] }) })).sort()).toEqual([
      'manifest.permissions.0',
      'manifest.target_types.0',
    ]);
    expect(badFields(await register(root, { manifest: manifest({ direction: 'bidirectional', version: '2.0.0' }) }))).toEqual(['manifest.bidirectional']);
    expect(badFields(await register(root, {}))).toEqual(['manifest']);
  });

  it('is registered by the root tenant\'s admins only', async () => {
    expectError(await register(otherAdmin, { manifest: manifest({ version: '9.0.0' }) }), 403, 'forbidden');
    expectError(await register(member, { manifest: manifest({ version: '9.0.0' }) }), 403, 'forbidden');
    expectError(await t.http.post('/integrations').send({ manifest: manifest() }), 401, 'unauthorized');
  });

  it('lists newest first with a name filter and cursor pagination, for any credential', async () => {
    await register(root, { manifest: manifest({ name: 'acme.notes', version: '0.1.0' }) }).expect(201);
    const page1 = await t.http.get('/integrations?name=acme.tasks&limit=1').set(bearer(member)).expect(200);
    expect(page1.body.integrations.map((i: { manifest_version: string }) => i.manifest_version)).toEqual(['1.1.0']);
    const page2 = await t.http.get(`/integrations?name=acme.tasks&limit=1&cursor=${page1.body.next_cursor}`).set(bearer(member)).expect(200);
    expect(page2.body.integrations.map((i: { manifest_version: string }) => i.manifest_version)).toEqual(['1.0.0']);
    expect(page2.body.next_cursor).toBeNull();
    expect((await t.http.get('/integrations').set(bearer(otherAdmin)).expect(200)).body.integrations).toHaveLength(3);
  });

  // After the listing above, which counts every registered manifest.
  it('answers Location: /integrations/{id}, which GET reads', async () => {
    const res = await register(root, { manifest: manifest({ name: 'acme.located' }) });
    expect((await expectLocation(t, res, `/integrations/${res.body.id}`, otherAdmin)).body).toEqual(res.body);
  });

  it('takes an Idempotency-Key: a retry gets the first 201 again, not 409 conflict, and the manifest is registered once', async () => {
    const once = (version: string) => () => register(root, { manifest: manifest({ name: 'acme.once', version }) });
    await expectReplayed(once('1.0.0'), once('2.0.0'), 201);
    expect(await t.sql(`SELECT manifest_version FROM integrations WHERE manifest_name = 'acme.once'`)).toEqual([{ manifest_version: '1.0.0' }]);
  });

  it('takes OAuth URLs by the host they name: https, or plain http to a loopback host, never with user info', async () => {
    const oauth = oauthManifest('acme.urls');
    for (const [authorize, token] of [
      ['http://127.0.0.1:x@evil.example/authorize', 'http://localhost:443@evil.example/token'],
      ['https://user:secret@auth.acme.example/authorize', 'http://[::1]@evil.example/token'],
      ['http://evil.example/127.0.0.1/authorize', 'not a url'],
    ]) {
      expect(badFields(await register(root, { manifest: oauth(authorize, token) })).sort()).toEqual(['manifest.oauth.authorize_url', 'manifest.oauth.token_url']);
    }
    expect((await register(root, { manifest: oauth('http://[::1]:8080/authorize', 'http://localhost/token') })).status).toBe(201);
  });

  it('refuses OAuth URLs the URL parser rewrites into another (a backslash, a missing or extra slash, whitespace), with port 0, as webhook targets, or with a fragment (RFC 6749 3.1, 3.2)', async () => {
    const oauth = oauthManifest('acme.rewritten');
    for (const [authorize, token] of [
      ['https://evil.example\\@trusted.example/authorize', 'https://trusted.example\\token'],
      ['https:///evil.example/authorize', 'https:evil.example/token'],
      ['https://auth.acme.example:0/authorize', 'http://127.0.0.1:0/token'],
      [' https://auth.acme.example/authorize', 'https://auth.acme.example/to\tken'],
      ['https://auth.acme.example/a/../authorize', 'https://auth.acme.example:443/token'],
      ['https://auth.acme.example/authorize#frag', 'https://auth.acme.example/token#'],
    ]) {
      const res = await register(root, { manifest: oauth(authorize, token) });
      expect([authorize, token, badFields(res).sort()]).toEqual([authorize, token, ['manifest.oauth.authorize_url', 'manifest.oauth.token_url']]);
    }
    // Only ASCII case and an empty path's `/` may differ, as the parser writes them.
    expect((await register(root, { manifest: oauth('HTTPS://Auth.Acme.Example/authorize', 'https://auth.acme.example?x=1') })).status).toBe(201);
  });

  it('takes OAuth scopes as RFC 6749 scope tokens only: no space (two scopes), quote, backslash or non-ASCII, naming each', async () => {
    const scoped = (scopes: string[], version = '1.0.0') => manifest({ name: 'acme.scoped', version, oauth: { ...manifest().oauth, scopes } });
    const res = await register(root, { manifest: scoped(['tasks.read', 'x y', 'say"so', 'back\\slash', 'caf\u00e9', '\t']) });
    expect(badFields(res).sort()).toEqual(['manifest.oauth.scopes.1', 'manifest.oauth.scopes.2', 'manifest.oauth.scopes.3', 'manifest.oauth.scopes.4', 'manifest.oauth.scopes.5']);
    expect((await register(root, { manifest: scoped(['openid', 'https://www.googleapis.com/auth/drive.readonly', 'a!#$%[]^~']) })).status).toBe(201);
  });

  it('requires oauth.client_id whenever a manifest has oauth (RFC 6749: every authorization request names its client)', async () => {
    const urls = { authorize_url: 'https://auth.acme.example/authorize', token_url: 'https://auth.acme.example/token' };
    for (const oauth of [urls, { ...urls, client_id: '' }]) {
      expect(badFields(await register(root, { manifest: manifest({ name: 'acme.clientless', oauth }) }))).toEqual(['manifest.oauth.client_id']);
    }
    const { oauth: _, ...noOauth } = manifest({ name: 'acme.clientless' });
    expect((await register(root, { manifest: noOauth })).status).toBe(201);
  });

  it('holds each trigger to its kind: an event trigger names an event of the catalogue, a schedule one its schedule, and none carries another kind\'s field', async () => {
    const refused = (triggers: object[]) => register(root, { manifest: manifest({ name: 'acme.triggered', triggers }) }).then(badFields);
    expect(await refused([{ kind: 'event' }, { kind: 'schedule' }])).toEqual(['manifest.triggers.0.event', 'manifest.triggers.1.schedule']);
    expect(await refused([{ kind: 'manual', event: 'item.created', schedule: 'every minute' }])).toEqual(['manifest.triggers.0.event', 'manifest.triggers.0.schedule']);
    expect(await refused([{ kind: 'event', event: 'no.such.event' }, { kind: 'schedule', schedule: 'daily', event: 'item.created' }])).toEqual(['manifest.triggers.0.event', 'manifest.triggers.1.event']);
    const ok = await register(root, { manifest: manifest({ name: 'acme.triggered', triggers: [{ kind: 'event', event: 'item.created' }, { kind: 'manual' }, { kind: 'webhook' }] }) });
    expect(ok.status).toBe(201);
    expect(ok.body.summary).toContain('runs on item.created, on manual, on webhook');
  });

  it('refuses display text that is blank or has line breaks (but in descriptions), control characters or bidirectional overrides (the rule of user names), and a webhook header that is no HTTP token, naming each', async () => {
    const res = await register(root, {
      manifest: manifest({
        name: 'acme.unreadable',
        publisher: 'Evil\nCorp',
        description: 'Acme\u202e\u0007\u001b[31m',
        runtime_compatibility: ['   '],
        triggers: [{ kind: 'schedule', schedule: 'daily\r\nSet: x' }, { kind: 'event', event: 'item.created\u0085' }],
        oauth: { ...manifest().oauth, client_id: 'svc\u2066' },
        webhook_verification: { scheme: 'hmac-sha256', header: 'X S\n' },
      }),
    });
    expect(badFields(res).sort()).toEqual([
      'manifest.description',
      'manifest.oauth.client_id',
      'manifest.publisher',
      'manifest.runtime_compatibility.0',
      'manifest.triggers.0.schedule',
      'manifest.triggers.1.event',
      'manifest.webhook_verification.header',
    ]);
    expect(badFields(await register(root, { manifest: manifest({ name: 'acme.unreadable', publisher: '   ' }) }))).toEqual(['manifest.publisher']);
    // One problem per field: an empty text is too short, and blank.
    expect(badFields(await register(root, { manifest: manifest({ name: 'acme.unreadable', publisher: '' }) }))).toEqual(['manifest.publisher']);
    // A description may hold paragraphs, not other control characters.
    expect(badFields(await register(root, { manifest: manifest({ name: 'acme.unreadable', description: 'One.\r\n\nTwo\r.' }) }))).toEqual(['manifest.description']);
    const readable = await register(root, {
      manifest: manifest({
        name: 'acme.unreadable',
        publisher: 'Acmé, Ltd. ❤️',
        description: 'Syncs tasks.\n\nTwo-way:\r\n\t- both sides',
        triggers: [{ kind: 'schedule', schedule: 'daily', description: 'Nightly.\nAt 2am.' }],
        webhook_verification: { scheme: 'hmac-sha256', header: "X-Sig_1!#$%&'*+.^`|~" },
      }),
    });
    expect(readable.status).toBe(201);
    expect(readable.body.summary).not.toMatch(/[\r\n]/);
  });

  it('takes a version by the SemVer 2.0 grammar, without build metadata (which makes no other version)', async () => {
    const versioned = (version: string) => register(root, { manifest: manifest({ name: 'acme.versioned', version }) });
    for (const version of ['1.0.0-01', '1.0.0-.', '1.0.0-a..b', '1.0.0-', '1.0.0+..', '1.0.0+build.5', '01.0.0', '1.0', 'v1.0.0']) {
      const res = await versioned(version);
      expect([version, badFields(res)]).toEqual([version, ['manifest.version']]);
    }
    for (const version of ['1.0.0', '1.0.0-alpha.1', '1.0.0-0.3.7', '1.0.0-x-y-z.--', '1.0.0-0A.is.legal', '10.20.30-rc.1']) {
      expect([version, (await versioned(version)).status]).toEqual([version, 201]);
    }
  });

  it('refuses an empty name filter', async () => {
    expect(badFields(await t.http.get('/integrations?name=').set(bearer(member)))).toEqual(['name']);
  });

  it('answers 404 integration_not_found for an unknown id, whatever its shape', async () => {
    expectError(await t.http.get('/integrations/00000000-0000-4000-8000-000000000000').set(bearer(member)), 404, 'integration_not_found');
    expectError(await t.http.get('/integrations/nope').set(bearer(member)), 404, 'integration_not_found');
    expectError(await t.http.get('/integrations/nope'), 401, 'unauthorized');
    // Save one with a NUL character, refused in every URL (README): 400 validation_error.
    expectError(await t.http.get('/integrations/%00').set(bearer(member)), 400, 'validation_error');
  });
});
