/**
 * Disabling a user (PATCH /users/{id} `disabled`): suspended without being deleted. Their sign-in
 * is refused as a wrong password is, on the provider's page and the account pages; what they had
 * ends at once (sign-ins, grants with their access and refresh tokens, the API keys they made on
 * the account pages), audited; enabled again they sign in, and what ended stays ended. Tokens are
 * real: an authorization code the user approves in the sign-in and consent pages.
 */
import request from 'supertest';
import { bearer, bootstrapAdmin, createTenant, startApp, TestApp } from './support/app';
import { browse, field } from './support/browse';
import { connect as connectApp, providerSignIn as signInForApp } from './support/code-flow';
import { withClockSkew } from './support/clock';
import { badFields, expectError } from './support/envelope';
import { waitFor } from './support/wait';

const redirectUri = 'https://app.example.com/callback';
const password = 'a long enough password';

type Agent = ReturnType<typeof request.agent>;

describe('disabled users', () => {
  let t: TestApp;
  let admin: string;
  let otherAdmin: string;
  let client: { client_id: string; client_secret: string };

  beforeAll(async () => {
    t = await startApp();
    admin = (await bootstrapAdmin(t)).key;
    otherAdmin = (await createTenant(t, admin, 'other')).key;
    client = (
      await t.http
        .post('/auth/clients')
        .set(bearer(admin))
        .send({ client_name: 'Notes app', redirect_uris: [redirectUri], grant_types: ['authorization_code', 'refresh_token'], scope: 'openid core.note:read' })
        .expect(201)
    ).body;
  });
  afterAll(async () => t?.close());

  const createUser = (key: string, email: string, body: Record<string, unknown> = {}) =>
    t.http.post('/users').set(bearer(key)).send({ email, password, name: 'User', role: 'admin', ...body });
  const patch = (key: string, id: string, body: unknown) => t.http.patch(`/users/${id}`).set(bearer(key)).send(body as object);
  const introspect = (token: string) => t.http.post('/auth/oauth2/introspect').auth(client.client_id, client.client_secret).type('form').send({ token });
  const refresh = (token: string) =>
    t.http.post('/auth/oauth2/token').auth(client.client_id, client.client_secret).type('form').send({ grant_type: 'refresh_token', refresh_token: token });

  const app = () => ({ ...client, redirect_uri: redirectUri, scope: 'openid core.note:read' });
  const providerSignIn = (email: string, pw = password) => signInForApp(t, app(), email, pw);
  const connect = (email: string) => connectApp(t, app(), email, password);

  /** A fresh browser signs in to the account pages as `email`: the browser and the sign-in's answer (303: signed in). */
  const accountSignIn = async (email: string, pw = password) => {
    const agent = request.agent(t.url);
    const form = await agent.get('/auth/sign-in?return_to=/auth/security').expect(200);
    const res = await agent.post('/auth/sign-in').type('form').send({ return_to: '/auth/security', csrf: field(form.text, 'csrf'), email, password: pw });
    return { agent, res };
  };

  /** The signed-in admin user of `agent` makes an API key on their security page: its plaintext. */
  const mintKey = async (agent: Agent) => {
    const page = (await agent.get('/auth/security').expect(200)).text;
    const shown = await agent.post('/auth/keys').type('form').send({ csrf: field(page, 'csrf'), form_nonce: field(page, 'form_nonce'), label: 'made on the page' }).expect(200);
    return /<code id="key">([^<]+)<\/code>/.exec(shown.text)![1];
  };

  /** A sign-in page without what differs on every showing (the form's CSRF token, the interaction). */
  const scrubbed = (html: string) => html.replace(/name="(csrf|uid)" value="[^"]*"/g, '');

  const auditOf = async (action: string, userId: string) =>
    ((await t.http.get('/audit').query({ action }).set(bearer(admin)).expect(200)).body.events as Array<{ user_id: string; details: Record<string, unknown> }>).filter(
      (e) => e.user_id === userId,
    );

  it('refuses a disabled user\'s sign-in as a wrong password, ends their sessions, tokens and account-page keys at once; enabled again, they sign in, and what ended stays ended', async () => {
    const user = (await createUser(admin, 'dora@example.com').expect(201)).body;
    expect(user.disabled).toBe(false);
    const tokens = await connect('dora@example.com');
    const account = await accountSignIn('dora@example.com');
    expect(account.res.status).toBe(303);
    const key = await mintKey(account.agent);
    const accountPages = async () => (await account.agent.get('/auth/grants').set('Accept', 'application/json')).status;
    // All of it works before.
    await t.http.get('/items').set(bearer(tokens.access_token)).expect(200);
    expect((await introspect(tokens.access_token)).body.active).toBe(true);
    await t.http.get('/items').set(bearer(key)).expect(200);
    expect(await accountPages()).toBe(200);

    const disabled = await patch(admin, user.id, { disabled: true }).expect(200);
    expect(disabled.body).toEqual({ ...user, disabled: true, updated_at: expect.any(String) });
    expect((await t.http.get(`/users/${user.id}`).set(bearer(admin)).expect(200)).body).toEqual(disabled.body);

    expectError(await t.http.get('/items').set(bearer(tokens.access_token)), 401, 'unauthorized');
    expect((await introspect(tokens.access_token)).body).toEqual({ active: false });
    expect((await introspect(tokens.refresh_token)).body).toEqual({ active: false });
    const refreshed = await refresh(tokens.refresh_token);
    expect([refreshed.status, refreshed.body.error]).toEqual([400, 'invalid_grant']);
    expectError(await t.http.get('/items').set(bearer(key)), 401, 'unauthorized');
    expect(await accountPages()).toBe(401);
    expect((await t.http.get(`/users/${user.id}/grants`).set(bearer(admin)).expect(200)).body.grants).toEqual([]);

    // The right password gets what a wrong one gets, on the provider's page and the account pages.
    const [wrong, right] = [await providerSignIn('dora@example.com', 'not the password at all'), await providerSignIn('dora@example.com')];
    expect([wrong.res.status, right.res.status]).toEqual([401, 401]);
    expect(scrubbed(right.res.text)).toBe(scrubbed(wrong.res.text));
    const [wrongAccount, rightAccount] = [await accountSignIn('dora@example.com', 'not the password at all'), await accountSignIn('dora@example.com')];
    expect([wrongAccount.res.status, rightAccount.res.status]).toEqual([401, 401]);
    expect(scrubbed(rightAccount.res.text)).toBe(scrubbed(wrongAccount.res.text));

    expect(await auditOf('user.updated', user.id)).toEqual([
      expect.objectContaining({ details: { actor: expect.objectContaining({ kind: 'api_key' }), changed: ['disabled'], grants_revoked: 1, keys_revoked: 1 } }),
    ]);
    expect(await auditOf('auth.grant.revoked', user.id)).toEqual([expect.objectContaining({ client_id: client.client_id, details: { by: 'user_disabled' } })]);

    const enabled = await patch(admin, user.id, { disabled: false }).expect(200);
    expect(enabled.body.disabled).toBe(false);
    expect((await accountSignIn('dora@example.com')).res.status).toBe(303);
    const again = await connect('dora@example.com');
    await t.http.get('/items').set(bearer(again.access_token)).expect(200);
    // What disabling ended stays ended.
    expectError(await t.http.get('/items').set(bearer(tokens.access_token)), 401, 'unauthorized');
    expectError(await t.http.get('/items').set(bearer(key)), 401, 'unauthorized');
    expect((await refresh(tokens.refresh_token)).status).toBe(400);
    expect(await accountPages()).toBe(401);
    const [enabling] = await auditOf('user.updated', user.id);
    expect(enabling.details).toEqual({ actor: expect.objectContaining({ kind: 'api_key' }), changed: ['disabled'] });
  });

  it('shows `disabled` on every user response, takes it on POST and PATCH as a boolean only, filters the list by it, and answers 404 for another tenant\'s user', async () => {
    const off = (await createUser(admin, 'off@example.com', { role: 'member', disabled: true }).expect(201)).body;
    const on = (await createUser(admin, 'on@example.com', { role: 'member' }).expect(201)).body;
    expect([off.disabled, on.disabled]).toEqual([true, false]);
    expect((await auditOf('user.created', off.id))[0].details).toMatchObject({ disabled: true });
    expect((await providerSignIn('off@example.com')).res.status).toBe(401);
    expect((await providerSignIn('on@example.com')).res.status).toBe(303);

    const listed = async (disabled: string) => (await t.http.get('/users').query({ disabled }).set(bearer(admin)).expect(200)).body.users as Array<{ id: string; disabled: boolean }>;
    const [disabledOnes, enabledOnes] = [await listed('true'), await listed('false')];
    expect(disabledOnes.map((u) => u.id)).toContain(off.id);
    expect(disabledOnes.every((u) => u.disabled)).toBe(true);
    expect(enabledOnes.map((u) => u.id)).toContain(on.id);
    expect(enabledOnes.every((u) => !u.disabled)).toBe(true);
    const all = (await t.http.get('/users').set(bearer(admin)).expect(200)).body.users as Array<{ disabled: unknown }>;
    expect(all.length).toBe(disabledOnes.length + enabledOnes.length);
    for (const bad of ['yes', '1', '', 'TRUE']) {
      expect(badFields(await t.http.get('/users').query({ disabled: bad }).set(bearer(admin)))).toEqual(['disabled']);
    }

    for (const bad of [null, 'true', 1, 'yes', {}]) expect(badFields(await patch(admin, on.id, { disabled: bad }))).toEqual(['disabled']);
    expect(badFields(await createUser(admin, 'bad@example.com', { disabled: 'true' }))).toEqual(['disabled']);
    expectError(await patch(otherAdmin, off.id, { disabled: false }), 404, 'not_found');
    expectError(await patch(otherAdmin, on.id, { disabled: true }), 404, 'not_found');
    expect((await t.http.get('/users').query({ disabled: 'true' }).set(bearer(otherAdmin)).expect(200)).body.users).toEqual([]);
    // Nothing above changed either.
    expect((await t.http.get(`/users/${off.id}`).set(bearer(admin)).expect(200)).body).toEqual(off);
    expect((await t.http.get(`/users/${on.id}`).set(bearer(admin)).expect(200)).body).toEqual(on);
    // Disabling a disabled user changes nothing, and audits nothing.
    expect((await patch(admin, off.id, { disabled: true }).expect(200)).body).toEqual(off);
    expect(await auditOf('user.updated', off.id)).toEqual([]);
  });

  it('keeps why a user was disabled (`disabled_reason`) for admins while they are disabled, refuses one for a user left enabled, and clears it when they are enabled again', async () => {
    const made = (await createUser(admin, 'reason@example.com', { role: 'member', disabled: true, disabled_reason: 'Left the company' }).expect(201)).body;
    expect(made).toMatchObject({ disabled: true, disabled_reason: 'Left the company' });
    const plain = (await createUser(admin, 'no-reason@example.com', { role: 'member' }).expect(201)).body;
    expect(plain.disabled_reason).toBeNull();
    // A reason goes with a disabled user only, and is readable text of at most 500 characters.
    expect(badFields(await createUser(admin, 'enabled-reason@example.com', { disabled_reason: 'why' }))).toEqual(['disabled_reason']);
    expect(badFields(await patch(admin, plain.id, { disabled_reason: 'why' }))).toEqual(['disabled_reason']);
    expect(badFields(await patch(admin, made.id, { disabled: false, disabled_reason: 'why' }))).toEqual(['disabled_reason']);
    for (const bad of ['', '   ', 'x'.repeat(501), 'a\u0000b', 'a\u202Eb', 7, ['x']]) {
      expect(badFields(await patch(admin, made.id, { disabled_reason: bad }))).toEqual(['disabled_reason']);
    }
    expect((await t.http.get(`/users/${plain.id}`).set(bearer(admin)).expect(200)).body).toEqual(plain);

    // Disabling with a reason; changing it alone on a disabled user; removing it with null.
    const disabled = (await patch(admin, plain.id, { disabled: true, disabled_reason: 'Security review' }).expect(200)).body;
    expect(disabled).toMatchObject({ disabled: true, disabled_reason: 'Security review' });
    expect((await patch(admin, plain.id, { disabled_reason: 'Security review, ticket 42' }).expect(200)).body.disabled_reason).toBe('Security review, ticket 42');
    const changes = (await auditOf('user.updated', plain.id)).map((e) => e.details.changed);
    expect(changes).toEqual(expect.arrayContaining([['disabled', 'disabled_reason'], ['disabled_reason']]));
    expect((await patch(admin, plain.id, { disabled_reason: null }).expect(200)).body).toMatchObject({ disabled: true, disabled_reason: null });
    // Listed with it; another tenant's admin sees neither the user nor the reason.
    const listed = (await t.http.get('/users').query({ disabled: 'true' }).set(bearer(admin)).expect(200)).body.users as Array<{ id: string; disabled_reason: string | null }>;
    expect(listed.find((u) => u.id === made.id)?.disabled_reason).toBe('Left the company');
    expectError(await patch(otherAdmin, made.id, { disabled_reason: 'mine' }), 404, 'not_found');

    // Enabled again: the reason goes with the suspension it explained, and the user signs in.
    expect((await patch(admin, made.id, { disabled: false }).expect(200)).body).toMatchObject({ disabled: false, disabled_reason: null });
    expect((await providerSignIn('reason@example.com')).res.status).toBe(303);
    // The sign-in page tells the person nothing of it while disabled.
    await patch(admin, plain.id, { disabled_reason: 'Security review' }).expect(200);
    const refused = await providerSignIn('no-reason@example.com');
    expect(refused.res.status).toBe(401);
    expect(refused.res.text).not.toContain('Security review');
  });

  it('ends a disablement at its `disabled_until`, by itself: refused until then, then the user signs in, makes keys and connects apps, and reads as enabled; disabled again, they stay so', async () => {
    const until = new Date(Date.now() + 3_600_000).toISOString();
    const user = (await createUser(admin, 'tempo@example.com').expect(201)).body;
    const tokens = await connect('tempo@example.com');
    const disabled = (await patch(admin, user.id, { disabled: true, disabled_until: until, disabled_reason: 'Cooling off' }).expect(200)).body;
    expect(disabled).toEqual({ ...user, disabled: true, disabled_reason: 'Cooling off', disabled_until: until, updated_at: expect.any(String) });
    expect((await auditOf('user.updated', user.id)).map((e) => e.details.changed)).toEqual([['disabled', 'disabled_reason', 'disabled_until']]);
    // Disabled as any disabled user is, until its end: what they had ended, and they get nothing new.
    expectError(await t.http.get('/items').set(bearer(tokens.access_token)), 401, 'unauthorized');
    expect((await refresh(tokens.refresh_token)).status).toBe(400);
    expect((await providerSignIn('tempo@example.com')).res.status).toBe(401);
    expect((await accountSignIn('tempo@example.com')).res.status).toBe(401);
    const listed = async (disabled: string) =>
      ((await t.http.get('/users').query({ disabled }).set(bearer(admin)).expect(200)).body.users as Array<{ id: string }>).map((u) => u.id);
    expect(await listed('true')).toContain(user.id);

    // Its end passes (written in the past, by the database's clock, rather than waited for).
    await t.sql(`UPDATE users SET disabled_until = now() - interval '1 second' WHERE id = $1`, [user.id]);
    const enabled = (await t.http.get(`/users/${user.id}`).set(bearer(admin)).expect(200)).body;
    expect(enabled).toEqual({ ...disabled, disabled: false, disabled_reason: null, disabled_until: null });
    expect(await listed('false')).toContain(user.id);
    expect(await listed('true')).not.toContain(user.id);
    // Nobody acted: no audit row says so.
    expect(await auditOf('user.updated', user.id)).toHaveLength(1);
    const account = await accountSignIn('tempo@example.com');
    expect(account.res.status).toBe(303);
    const key = await mintKey(account.agent);
    await t.http.get('/items').set(bearer(key)).expect(200);
    const again = await connect('tempo@example.com');
    await t.http.get('/items').set(bearer(again.access_token)).expect(200);
    expect((await refresh(again.refresh_token)).status).toBe(200);
    // What disabling ended stays ended.
    expectError(await t.http.get('/items').set(bearer(tokens.access_token)), 401, 'unauthorized');
    // Enabling an enabled user changes nothing, and the ended disablement's end does not come back with the next one.
    expect((await patch(admin, user.id, { disabled: false }).expect(200)).body).toEqual(enabled);
    expect(await auditOf('user.updated', user.id)).toHaveLength(1);
    const redisabled = (await patch(admin, user.id, { disabled: true }).expect(200)).body;
    expect(redisabled).toMatchObject({ disabled: true, disabled_reason: null, disabled_until: null });
    expect((await auditOf('user.updated', user.id))[0].details).toMatchObject({ changed: ['disabled'], grants_revoked: 1, keys_revoked: 1 });
    expectError(await t.http.get('/items').set(bearer(key)), 401, 'unauthorized');
    expectError(await t.http.get('/items').set(bearer(again.access_token)), 401, 'unauthorized');
    expect((await accountSignIn('tempo@example.com')).res.status).toBe(401);
  });

  it('judges a disablement\'s end by the database\'s clock, whatever the server\'s own clock says, and the same for a new one', async () => {
    const ended = (await createUser(admin, 'ended@example.com', { disabled: true }).expect(201)).body;
    const ongoing = (await createUser(admin, 'ongoing@example.com', { disabled: true }).expect(201)).body;
    await t.sql(`UPDATE users SET disabled_until = now() - interval '1 minute' WHERE id = $1`, [ended.id]);
    await t.sql(`UPDATE users SET disabled_until = now() + interval '1 minute' WHERE id = $1`, [ongoing.id]);
    // A server clock two minutes slow would still call the first one disabled, two minutes fast the second one enabled.
    const [endedRead, endedSignIn] = await withClockSkew(-120_000, async () => [(await t.http.get(`/users/${ended.id}`).set(bearer(admin))).body, (await accountSignIn('ended@example.com')).res.status]);
    expect(endedRead).toMatchObject({ disabled: false, disabled_until: null });
    expect(endedSignIn).toBe(303);
    const [ongoingRead, ongoingSignIn] = await withClockSkew(120_000, async () => [(await t.http.get(`/users/${ongoing.id}`).set(bearer(admin))).body, (await accountSignIn('ongoing@example.com')).res.status]);
    expect(ongoingRead).toMatchObject({ disabled: true, disabled_until: expect.any(String) });
    expect(ongoingSignIn).toBe(401);
    // A new end: a minute ahead of the database is in the future for a server two minutes fast; a minute behind is not, for one two minutes slow.
    const [[ahead], [behind]] = [
      await t.sql<{ at: Date }>(`SELECT now() + interval '1 minute' AS at`),
      await t.sql<{ at: Date }>(`SELECT now() - interval '1 minute' AS at`),
    ];
    const set = await withClockSkew(120_000, () => patch(admin, ongoing.id, { disabled_until: ahead.at.toISOString() }));
    expect([set.status, set.body.disabled_until]).toEqual([200, ahead.at.toISOString()]);
    expect(badFields(await withClockSkew(-120_000, () => patch(admin, ongoing.id, { disabled_until: behind.at.toISOString() })))).toEqual(['disabled_until']);
  });

  it('takes `disabled_until` on POST and PATCH with a disabled user only, in the future and at most about 10 years ahead; null removes it, enabling clears it; shown to admins, audited', async () => {
    const inSeconds = (s: number) => new Date(Date.now() + s * 1000).toISOString();
    const until = inSeconds(86_400);
    const made = (await createUser(admin, 'until@example.com', { role: 'member', disabled: true, disabled_until: until.replace('Z', '+00:00') }).expect(201)).body;
    expect(made).toMatchObject({ disabled: true, disabled_reason: null, disabled_until: until });
    expect((await auditOf('user.created', made.id))[0].details).toMatchObject({ disabled: true, disabled_until: until });
    expect((await t.http.get(`/users/${made.id}`).set(bearer(admin)).expect(200)).body).toEqual(made);
    const plain = (await createUser(admin, 'no-until@example.com', { role: 'member' }).expect(201)).body;
    expect(plain.disabled_until).toBeNull();

    // Only with a disabled user, as `disabled_reason` (both named when both are sent).
    expect(badFields(await createUser(admin, 'enabled-until@example.com', { disabled_until: until }))).toEqual(['disabled_until']);
    expect(badFields(await createUser(admin, 'enabled-until@example.com', { disabled: false, disabled_until: until, disabled_reason: 'why' }))).toEqual(['disabled_reason', 'disabled_until']);
    expect(badFields(await patch(admin, plain.id, { disabled_until: until }))).toEqual(['disabled_until']);
    expect(badFields(await patch(admin, made.id, { disabled: false, disabled_until: until }))).toEqual(['disabled_until']);
    // An RFC 3339 instant in the future, at most 3653 days ahead; not null on creation.
    for (const bad of [inSeconds(-1), new Date().toISOString().slice(0, 19) + 'Z', inSeconds(3660 * 86_400), '2030-01-01', '2030-01-01T00:00:00', 'soon', 5, true]) {
      expect(badFields(await patch(admin, made.id, { disabled_until: bad }))).toEqual(['disabled_until']);
      expect(badFields(await createUser(admin, 'bad-until@example.com', { disabled: true, disabled_until: bad }))).toEqual(['disabled_until']);
    }
    expect(badFields(await createUser(admin, 'bad-until@example.com', { disabled: true, disabled_until: null }))).toEqual(['disabled_until']);
    expect((await patch(admin, made.id, { disabled_until: inSeconds(3650 * 86_400) }).expect(200)).body.disabled_until).not.toBeNull();
    expect((await t.http.get(`/users/${plain.id}`).set(bearer(admin)).expect(200)).body).toEqual(plain);
    expectError(await patch(otherAdmin, made.id, { disabled_until: until }), 404, 'not_found');

    // Changed alone on a disabled user; kept by "disabled": true; removed with null (the disablement then lasts); cleared by enabling.
    const later = inSeconds(2 * 86_400);
    expect((await patch(admin, made.id, { disabled_until: later }).expect(200)).body.disabled_until).toBe(later);
    expect((await patch(admin, made.id, { disabled: true, name: 'Renamed' }).expect(200)).body.disabled_until).toBe(later);
    expect((await patch(admin, made.id, { disabled_until: null }).expect(200)).body).toMatchObject({ disabled: true, disabled_until: null });
    expect((await providerSignIn('until@example.com')).res.status).toBe(401);
    await patch(admin, made.id, { disabled_until: until, disabled_reason: 'Holiday' }).expect(200);
    const listed = (await t.http.get('/users').query({ disabled: 'true' }).set(bearer(admin)).expect(200)).body.users as Array<{ id: string; disabled_until: string | null }>;
    expect(listed.find((u) => u.id === made.id)?.disabled_until).toBe(until);
    expect((await patch(admin, made.id, { disabled: false }).expect(200)).body).toMatchObject({ disabled: false, disabled_reason: null, disabled_until: null });
    expect((await auditOf('user.updated', made.id)).map((e) => e.details.changed).reverse()).toEqual([
      ['disabled_until'],
      ['disabled_until'],
      ['name'],
      ['disabled_until'],
      ['disabled_reason', 'disabled_until'],
      ['disabled'],
    ]);
    expect((await providerSignIn('until@example.com')).res.status).toBe(303);
  });

  it('makes no grant from a consent being recorded while the user is disabled: the consent waits for the user\'s row, then finds them disabled', async () => {
    const u = (await createUser(admin, 'racing@example.com').expect(201)).body;
    const { res, agent } = await providerSignIn('racing@example.com');
    expect(res.status).toBe(303);
    const next = new URL(res.headers.location, t.url);
    const consent = await browse(agent, t.url, next.pathname + next.search);
    expect(consent.path).toMatch(/^\/auth\/consent/);
    const waiting = async () => {
      await t.sql('SELECT pg_stat_clear_snapshot()');
      return (await t.sql(`SELECT 1 FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock' AND query LIKE '%FROM users WHERE tenant_id = $1 AND id = $2 FOR SHARE%'`)).length > 0;
    };
    let answer: request.Response;
    await t.sql('BEGIN');
    try {
      await t.sql(`SELECT 1 FROM users WHERE id = $1 FOR UPDATE`, [u.id]);
      const sent = agent.post('/auth/authorize/decision').type('form').send({ uid: field(consent.page!, 'uid'), csrf: field(consent.page!, 'csrf'), decision: 'approve' }).then((r) => r);
      await waitFor(waiting, 'the decision to wait for the user\'s row');
      await t.sql(`UPDATE users SET disabled = true WHERE id = $1`, [u.id]);
      await t.sql('COMMIT');
      answer = await sent;
    } catch (err) {
      await t.sql('ROLLBACK');
      throw err;
    }
    expect(answer.status).toBe(400);
    expect(await t.sql(`SELECT 1 FROM oidc_models WHERE model = 'Grant' AND payload->>'accountId' = $1`, [u.id])).toEqual([]);
  });

  it('does not let a key its user made on the account pages disable that user (409 conflict); another admin\'s key may', async () => {
    const own = (await createTenant(t, admin, 'self')).key;
    const u = (await createUser(own, 'self@example.com').expect(201)).body;
    const account = await accountSignIn('self@example.com');
    const key = await mintKey(account.agent);
    expect(expectError(await patch(key, u.id, { disabled: true }), 409, 'conflict').details).toEqual({ field: 'disabled' });
    expect((await t.http.get(`/users/${u.id}`).set(bearer(key)).expect(200)).body.disabled).toBe(false);
    // The key may still change the rest of its user.
    await patch(key, u.id, { name: 'Self 2' }).expect(200);
    await patch(own, u.id, { disabled: true }).expect(200);
    expectError(await t.http.get('/users').set(bearer(key)), 401, 'unauthorized');
  });
});
