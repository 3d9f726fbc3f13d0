/**
 * `/users` (CONTRACT "Users"): admins create, list, read and delete the users of their tenant,
 * who sign in to the OAuth provider. Passwords are stored as scrypt hashes, never returned.
 */
import request from 'supertest';
import { bearer, bootstrapAdmin, createKey, createTenant, startApp, TestApp } from './support/app';
import { field } from './support/browse';
import { expectLocation, expectReplayed } from './support/created';
import { badFields, expectError } from './support/envelope';

describe('users', () => {
  let t: TestApp;
  let admin: string;
  let member: string;
  let otherAdmin: string;

  beforeAll(async () => {
    t = await startApp({ SVC_SIGNUP_ENABLED: 'true' });
    admin = (await bootstrapAdmin(t)).key;
    member = (await createKey(t, admin, { label: 'member', role: 'member' })).key;
    otherAdmin = (await createTenant(t, admin)).key;
  });
  afterAll(async () => t?.close());

  const create = (key: string, body: Record<string, unknown>) => t.http.post('/users').set(bearer(key)).send(body);

  it('creates a user without ever returning or storing the password in clear', async () => {
    const res = await create(admin, { email: ' Ada@Example.com ', password: 'correct horse battery', name: 'Ada', role: 'admin', picture: 'https://example.com/ada.png' });
    expect(res.status).toBe(201);
    expect(res.body).toEqual({
      id: expect.any(String),
      tenant_id: expect.any(String),
      email: 'Ada@Example.com',
      name: 'Ada',
      role: 'admin',
      picture: 'https://example.com/ada.png',
      email_verified: false,
      disabled: false,
      disabled_reason: null,
      disabled_until: null,
      created_at: expect.stringMatching(/Z$/),
      updated_at: res.body.created_at,
    });
    const [row] = await t.sql<{ password_hash: string }>(`SELECT password_hash FROM users WHERE id = $1`, [res.body.id]);
    expect(row.password_hash).toMatch(/^scrypt\$/);
    expect(row.password_hash).not.toContain('correct horse battery');
    const member = await create(admin, { email: 'bob@example.com', password: 'another long one', name: 'Bob' });
    expect(member.body.role).toBe('member');
    expect(member.body.picture).toBeNull();
  });

  // In a tenant of their own: the listing below counts the first tenant's users and the other's.
  it('answers Location: /users/{id}, which GET reads', async () => {
    const own = (await createTenant(t, admin, 'users located')).key;
    const res = await create(own, { email: 'located@example.com', password: 'correct horse battery', name: 'Located' });
    expect((await expectLocation(t, res, `/users/${res.body.id}`, own)).body).toEqual(res.body);
  });

  it('takes an Idempotency-Key: a retry gets the first 201 again, not 409 conflict, and the user is made once', async () => {
    const own = (await createTenant(t, admin, 'users once')).key;
    const user = (email: string) => () => create(own, { email, password: 'correct horse battery', name: 'Once' });
    await expectReplayed(user('once@example.com'), user('other@example.com'), 201);
    expect(await t.sql(`SELECT email FROM users WHERE email IN ('once@example.com', 'other@example.com')`)).toEqual([{ email: 'once@example.com' }]);
  });

  it('refuses a taken email in any letter case, across tenants (409 conflict)', async () => {
    expectError(await create(admin, { email: 'ADA@example.com', password: 'correct horse battery', name: 'Ada 2' }), 409, 'conflict');
    expectError(await create(otherAdmin, { email: 'ada@example.COM', password: 'correct horse battery', name: 'Ada 3' }), 409, 'conflict');
  });

  it('names each bad field', async () => {
    expect(badFields(await create(admin, { email: 'not-an-email', password: 'short', name: '', role: 'owner', picture: 'http://x' })).sort()).toEqual(
      ['email', 'name', 'password', 'picture', 'role'],
    );
    expect(badFields(await create(admin, { email: 'c@example.com', password: 'long enough pw', name: 'C', password_hash: 'x' }))).toEqual(['password_hash']);
  });

  it('refuses a password of only whitespace or invisible characters, on POST /users and on the sign-up page alike', async () => {
    for (const password of [' '.repeat(12), ' \t\n'.repeat(4), '\u200b'.repeat(10), '\u2060\u00ad'.repeat(5)]) {
      expect(badFields(await create(admin, { email: 'blank@example.com', password, name: 'Blank' }))).toEqual(['password']);
    }
    const agent = request.agent(t.url);
    const csrf = field((await agent.get('/auth/sign-up').expect(200)).text, 'csrf');
    const blank = await agent.post('/auth/sign-up').type('form').send({ csrf, name: 'Blank', email: 'blank@example.com', password: ' '.repeat(12) });
    expect(blank.status).toBe(400);
    expect(blank.text).toContain('The password needs at least 10 characters, not only spaces or invisible ones.');
    expect(await t.sql(`SELECT 1 FROM users WHERE email = 'blank@example.com'`)).toEqual([]);
    // Spaces inside a password are fine.
    await create(admin, { email: 'spaced@example.com', password: '  a b c d e  ', name: 'Spaced' }).expect(201);
    await t.http.delete(`/users/${(await t.sql<{ id: string }>(`SELECT id FROM users WHERE email = 'spaced@example.com'`))[0].id}`).set(bearer(admin)).expect(200);
  });

  it('counts a password\'s length by character, as the OpenAPI document\'s minLength and maxLength do: an emoji is one', async () => {
    expect(badFields(await create(admin, { email: 'emoji@example.com', password: '😀'.repeat(5) + 'abcd', name: 'Emoji' }))).toEqual(['password']);
    expect(badFields(await create(admin, { email: 'emoji@example.com', password: '😀'.repeat(1025), name: 'Emoji' }))).toEqual(['password']);
    const emoji = await create(admin, { email: 'emoji@example.com', password: '😀'.repeat(1024), name: 'Emoji' }).expect(201);
    await t.http.delete(`/users/${emoji.body.id}`).set(bearer(admin)).expect(200);
  });

  it('lists the tenant\'s users newest first with cursor pagination, and reads one', async () => {
    const first = await t.http.get('/users?limit=1').set(bearer(admin)).expect(200);
    expect(first.body.users.map((u: { name: string }) => u.name)).toEqual(['Bob']);
    const second = await t.http.get(`/users?limit=1&cursor=${first.body.next_cursor}`).set(bearer(admin)).expect(200);
    expect(second.body.users.map((u: { name: string }) => u.name)).toEqual(['Ada']);
    expect(second.body.next_cursor).toBeNull();
    expect(JSON.stringify(second.body)).not.toContain('password');
    const one = await t.http.get(`/users/${second.body.users[0].id}`).set(bearer(admin)).expect(200);
    expect(one.body.email).toBe('Ada@Example.com');
    expect((await t.http.get('/users').set(bearer(otherAdmin)).expect(200)).body.users).toEqual([]);
    expectError(await t.http.get(`/users/${second.body.users[0].id}`).set(bearer(otherAdmin)), 404, 'not_found');
    // By email, in any letter case; another tenant's admin finds no one.
    expect((await t.http.get('/users').query({ email: 'ada@EXAMPLE.com' }).set(bearer(admin)).expect(200)).body).toEqual({ users: [one.body], next_cursor: null });
    expect((await t.http.get('/users').query({ email: 'nobody@example.com' }).set(bearer(admin)).expect(200)).body.users).toEqual([]);
    expect((await t.http.get('/users').query({ email: 'ada@example.com' }).set(bearer(otherAdmin)).expect(200)).body.users).toEqual([]);
    expect(badFields(await t.http.get('/users').query({ email: '' }).set(bearer(admin)))).toEqual(['email']);
  });

  it('is admin-only, and unauthenticated calls are 401', async () => {
    expectError(await create(member, { email: 'm@example.com', password: 'long enough pw', name: 'M' }), 403, 'forbidden');
    expectError(await t.http.get('/users').set(bearer(member)), 403, 'forbidden');
    expectError(await t.http.get('/users'), 401, 'unauthorized');
  });

  it('deletes a user (200 with the user), then it is gone', async () => {
    const u = await create(admin, { email: 'gone@example.com', password: 'long enough pw', name: 'Gone' });
    expectError(await t.http.delete(`/users/${u.body.id}`).set(bearer(otherAdmin)), 404, 'not_found');
    const res = await t.http.delete(`/users/${u.body.id}`).set(bearer(admin)).expect(200);
    expect(res.body.id).toBe(u.body.id);
    expectError(await t.http.delete(`/users/${u.body.id}`).set(bearer(admin)), 404, 'not_found');
    expectError(await t.http.get('/users/not-an-id').set(bearer(admin)), 400, 'invalid_id');
  });

  it('refuses a blank name, or one with control or bidirectional override characters, on POST /users, PATCH /users and the sign-up page', async () => {
    // Blank too: only zero-width, filler or tag characters, which show nothing where the name should be.
    const invisible = ['\u200b', '\u3164', '\u2800', '\u00ad\u034f', '\u2060', '\u115f\u1160', '\u{E0041}\u{E0042}'];
    const bad = ['   ', '\u3000\t', ...invisible, 'Ada\u0007', 'Ada\nLovelace', 'Ada\u0085', 'Ada\u007f', '\u202eecilA', 'Ada\u2066x\u2069', 'Ada\u202a'];
    for (const name of bad) {
      expect(badFields(await create(admin, { email: 'names@example.com', password: 'long enough pw', name }))).toEqual(['name']);
    }
    const u = await create(admin, { email: 'names@example.com', password: 'long enough pw', name: 'Zoë 😀 Ünal' }).expect(201);
    for (const name of bad) expect(badFields(await t.http.patch(`/users/${u.body.id}`).set(bearer(admin)).send({ name }))).toEqual(['name']);
    expect((await t.http.get(`/users/${u.body.id}`).set(bearer(admin)).expect(200)).body.name).toBe('Zoë 😀 Ünal');
    const agent = request.agent(t.url);
    const csrf = field((await agent.get('/auth/sign-up').expect(200)).text, 'csrf');
    for (const name of ['\u202e\u0007bell', 'A\u2068B', ...invisible]) {
      const page = await agent.post('/auth/sign-up').type('form').send({ csrf, name, email: 'bell@example.com', password: 'a long sign-up password' });
      expect(page.status).toBe(400);
      expect(page.text).toContain('A name cannot hold control characters or bidirectional override characters.');
    }
    expect(await t.sql(`SELECT 1 FROM users WHERE email = 'bell@example.com'`)).toEqual([]);
    await t.http.delete(`/users/${u.body.id}`).set(bearer(admin)).expect(200);
  });

  it('refuses an email holding a bidirectional override, a zero-width or another invisible character, on POST /users and the sign-up page', async () => {
    // Shown on the pages and sent to apps (`email`, `preferred_username`): U+202E would show a\u202eb@example.com as "amoc.elpmaxe@b".
    const bad = ['a\u202eb@example.com', 'a\u200fb@example.com', 'a\u200b@example.com', 'ada@exa\u2060mple.com', 'a\u3164b@example.com', 'a\u2066b\u2069@example.com'];
    for (const email of bad) {
      const error = expectError(await create(admin, { email, password: 'long enough pw', name: 'Hidden' }), 400, 'validation_error');
      expect([email, error.details!.fields]).toEqual([email, [{ field: 'email', message: expect.stringContaining('invisible characters') }]]);
    }
    const agent = request.agent(t.url);
    const csrf = field((await agent.get('/auth/sign-up').expect(200)).text, 'csrf');
    for (const email of bad) {
      const page = await agent.post('/auth/sign-up').type('form').send({ csrf, name: 'Hidden', email, password: 'a long sign-up password' });
      expect([email, page.status]).toEqual([email, 400]);
      expect(page.text).toContain('Give a valid email address.');
    }
    expect(await t.sql(`SELECT email FROM users WHERE name = 'Hidden'`)).toEqual([]);
    await create(admin, { email: 'zoë@exämple.com', password: 'long enough pw', name: 'Hidden' }).expect(201);
  });

  it('counts a name\'s 200 characters by code point on POST and PATCH /users and the sign-up page alike: ❤️ (with its variation selector) is two', async () => {
    const [longest, tooLong] = ['a'.repeat(198) + '❤️', 'a'.repeat(199) + '❤️'];
    expect(badFields(await create(admin, { email: 'heart@example.com', password: 'long enough pw', name: tooLong }))).toEqual(['name']);
    const u = await create(admin, { email: 'heart@example.com', password: 'long enough pw', name: longest }).expect(201);
    expect(u.body.name).toBe(longest);
    expect(badFields(await t.http.patch(`/users/${u.body.id}`).set(bearer(admin)).send({ name: tooLong }))).toEqual(['name']);
    await t.http.delete(`/users/${u.body.id}`).set(bearer(admin)).expect(200);
    const agent = request.agent(t.url);
    const csrf = field((await agent.get('/auth/sign-up').expect(200)).text, 'csrf');
    const signUp = (name: string) => agent.post('/auth/sign-up').type('form').send({ csrf, name, email: 'heart-up@example.com', password: 'a long sign-up password' });
    const refused = await signUp(tooLong);
    expect(refused.status).toBe(400);
    expect(refused.text).toContain('Give a name of at most 200 characters.');
    await signUp(longest).expect(303);
    expect(await t.sql(`SELECT name FROM users WHERE email = 'heart-up@example.com'`)).toEqual([{ name: longest }]);
  });

  describe('PATCH /users/{id}', () => {
    const patch = (key: string, id: string, body: unknown) => t.http.patch(`/users/${id}`).set(bearer(key)).send(body as object);
    /** Signs a fresh browser in to the account pages; the status of the sign-in post (303: signed in). */
    const signIn = async (email: string, password: string) => {
      const agent = request.agent(t.url);
      const form = await agent.get('/auth/sign-in?return_to=/auth/grants').expect(200);
      const res = await agent.post('/auth/sign-in').type('form').send({ return_to: '/auth/grants', csrf: field(form.text, 'csrf'), email, password });
      return { agent, status: res.status };
    };

    it('changes name, role, picture and password, leaving absent fields as they are', async () => {
      const u = (await create(admin, { email: 'pat@example.com', password: 'first password', name: 'Pat', role: 'admin', picture: 'https://example.com/p.png' }).expect(201)).body;
      const renamed = await patch(admin, u.id, { name: 'Pat Smith' }).expect(200);
      expect(renamed.body).toEqual({ ...u, name: 'Pat Smith', updated_at: expect.any(String) });
      expect(renamed.body.updated_at > u.updated_at).toBe(true);
      const demoted = await patch(admin, u.id, { role: 'member', picture: null }).expect(200);
      expect(demoted.body).toEqual({ ...u, name: 'Pat Smith', role: 'member', picture: null, updated_at: expect.any(String) });
      // A PATCH that changes nothing leaves updated_at as it was.
      expect((await patch(admin, u.id, {}).expect(200)).body).toEqual(demoted.body);
      expect((await patch(admin, u.id, { name: 'Pat Smith' }).expect(200)).body).toEqual(demoted.body);
      expect((await t.http.get(`/users/${u.id}`).set(bearer(admin)).expect(200)).body).toEqual(demoted.body);
      const vouched = (await patch(admin, u.id, { email_verified: true }).expect(200)).body;
      expect(vouched).toEqual({ ...demoted.body, email_verified: true, updated_at: expect.any(String) });
      expect(vouched.updated_at > demoted.body.updated_at).toBe(true);
      expect((await create(admin, { email: 'vouched@example.com', password: 'a long password', name: 'V', email_verified: true }).expect(201)).body.email_verified).toBe(true);
      for (const bad of [null, 'yes', 1]) expect(badFields(await patch(admin, u.id, { email_verified: bad }))).toEqual(['email_verified']);
      // Every tenant shares one issuer: another tenant's admins may not vouch for an address (TENANT_ADMINS_VERIFY_EMAILS is off).
      const theirs = (await create(otherAdmin, { email: 'theirs@example.com', password: 'a long password', name: 'T' }).expect(201)).body;
      expectError(await create(otherAdmin, { email: 'ceo@example.com', password: 'a long password', name: 'C', email_verified: true }), 403, 'forbidden');
      expectError(await patch(otherAdmin, theirs.id, { email_verified: true }), 403, 'forbidden');
      expect((await t.http.get(`/users/${theirs.id}`).set(bearer(otherAdmin)).expect(200)).body.email_verified).toBe(false);
      expect((await t.http.get('/users').query({ email: 'ceo@example.com' }).set(bearer(otherAdmin)).expect(200)).body.users).toEqual([]);

      await patch(admin, u.id, { password: 'second password' }).expect(200);
      expect((await signIn('pat@example.com', 'first password')).status).toBe(401);
      expect((await signIn('pat@example.com', 'second password')).status).toBe(303);
      const [row] = await t.sql<{ password_hash: string }>(`SELECT password_hash FROM users WHERE id = $1`, [u.id]);
      expect(row.password_hash).toMatch(/^scrypt\$/);
      await t.http.delete(`/users/${u.id}`).set(bearer(admin)).expect(200);
    });

    it('shows the user on their security page that their account was made and changed (a promotion with its roles, a new password), never a value', async () => {
      const u = (await create(admin, { email: 'sec@example.com', password: 'first password', name: 'Sec' }).expect(201)).body;
      await patch(admin, u.id, { role: 'admin', password: 'second password', picture: 'https://example.com/s.png' }).expect(200);
      const agent = request.agent(t.url);
      const form = await agent.get('/auth/sign-in?return_to=/auth/security').expect(200);
      await agent.post('/auth/sign-in').type('form').send({ return_to: '/auth/security', csrf: field(form.text, 'csrf'), email: 'sec@example.com', password: 'second password' }).expect(303);
      const page = (await agent.get('/auth/security').expect(200)).text;
      const lines = [...page.matchAll(/<\/time>: ([^<]*)<\/li>/g)].map((m) => m[1]);
      expect(lines).toEqual(['your account was changed: role (member → admin), picture, password', 'your account was created']);
      expect(page).not.toContain('second password');
    });

    it('validates as POST /users does, is admin-only, and answers 404 for another tenant\'s user', async () => {
      const u = (await create(admin, { email: 'val@example.com', password: 'long enough pw', name: 'Val' }).expect(201)).body;
      expect(badFields(await patch(admin, u.id, { password: 'short', name: '', role: 'owner', picture: 'http://x' })).sort()).toEqual(['name', 'password', 'picture', 'role']);
      expect(badFields(await patch(admin, u.id, { password: ' '.repeat(12) }))).toEqual(['password']);
      expect(badFields(await patch(admin, u.id, { name: null, role: null, password: null })).sort()).toEqual(['name', 'password', 'role']);
      expect(badFields(await patch(admin, u.id, { email: 'new@example.com', password_hash: 'x' })).sort()).toEqual(['email', 'password_hash']);
      expect(badFields(await patch(admin, u.id, [{ name: 'x' }]))).toEqual(['(body)']);
      expectError(await patch(member, u.id, { name: 'M' }), 403, 'forbidden');
      expectError(await t.http.patch(`/users/${u.id}`).send({ name: 'M' }), 401, 'unauthorized');
      expectError(await patch(otherAdmin, u.id, { name: 'Other' }), 404, 'not_found');
      expectError(await patch(admin, '00000000-0000-4000-8000-000000000001', { name: 'Nobody' }), 404, 'not_found');
      expectError(await patch(admin, 'not-an-id', { name: 'x' }), 400, 'invalid_id');
      expect((await t.http.get(`/users/${u.id}`).set(bearer(admin)).expect(200)).body).toEqual(u);
      await t.http.delete(`/users/${u.id}`).set(bearer(admin)).expect(200);
    });

    it('ends the user\'s account-page sign-ins on a new password or a demotion, not on a rename or a promotion', async () => {
      const u = (await create(admin, { email: 'epoch@example.com', password: 'long enough pw', name: 'Epoch', role: 'member' }).expect(201)).body;
      const signedIn = async () => (await signIn('epoch@example.com', 'long enough pw')).agent;
      const stillIn = async (agent: ReturnType<typeof request.agent>) => (await agent.get('/auth/grants').set('Accept', 'application/json')).status === 200;

      let browser = await signedIn();
      await patch(admin, u.id, { name: 'Epoch 2', picture: 'https://example.com/e.png' }).expect(200);
      await patch(admin, u.id, { role: 'admin' }).expect(200);
      expect(await stillIn(browser)).toBe(true);
      await patch(admin, u.id, { role: 'member' }).expect(200);
      expect(await stillIn(browser)).toBe(false);

      browser = await signedIn();
      await patch(admin, u.id, { password: 'long enough pw' }).expect(200);
      expect(await stillIn(browser)).toBe(false);
      expect(await stillIn(await signedIn())).toBe(true);
      await t.http.delete(`/users/${u.id}`).set(bearer(admin)).expect(200);
    });
  });
});
