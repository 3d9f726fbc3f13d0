/**
 * `/users` (CONTRACT "Users"): admins create, list, read and delete the users of their tenant,
 * who sign in to the OAuth provider. Passwords are stored as scrypt hashes, never returned.
 */
import request from 'supertest';
import { bearer, bootstrapAdmin, createKey, createTenant, startApp, TestApp } from './support/app';
import { field } from './support/browse';
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
      created_at: expect.stringMatching(/Z$/),
    });
    const [row] = await t.sql<{ password_hash: string }>(`SELECT password_hash FROM users WHERE id = $1`, [res.body.id]);
    expect(row.password_hash).toMatch(/^scrypt\$/);
    expect(row.password_hash).not.toContain('correct horse battery');
    const member = await create(admin, { email: 'bob@example.com', password: 'another long one', name: 'Bob' });
    expect(member.body.role).toBe('member');
    expect(member.body.picture).toBeNull();
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

  it('refuses a password of only whitespace, on POST /users and on the sign-up page alike', async () => {
    for (const password of [' '.repeat(12), ' \t\n'.repeat(4)]) {
      expect(badFields(await create(admin, { email: 'blank@example.com', password, name: 'Blank' }))).toEqual(['password']);
    }
    const agent = request.agent(t.url);
    const csrf = field((await agent.get('/auth/sign-up').expect(200)).text, 'csrf');
    const blank = await agent.post('/auth/sign-up').type('form').send({ csrf, name: 'Blank', email: 'blank@example.com', password: ' '.repeat(12) });
    expect(blank.status).toBe(400);
    expect(blank.text).toContain('The password needs at least 10 characters, not only spaces.');
    expect(await t.sql(`SELECT 1 FROM users WHERE email = 'blank@example.com'`)).toEqual([]);
    // Spaces inside a password are fine.
    await create(admin, { email: 'spaced@example.com', password: '  a b c d e  ', name: 'Spaced' }).expect(201);
    await t.http.delete(`/users/${(await t.sql<{ id: string }>(`SELECT id FROM users WHERE email = 'spaced@example.com'`))[0].id}`).set(bearer(admin)).expect(200);
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
});
