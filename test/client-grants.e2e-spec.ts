/**
 * GET /auth/clients/{client_id}/grants: which of the tenant's users connected an app, newest
 * first, paged, for the admins who may read the client (its tenant's; a root-tenant admin's for
 * an openly registered one). Grants are real, given through the device flow. A grant revoked or
 * expired leaves the list; users of other tenants never appear in it, also for an openly
 * registered app that serves every tenant's users.
 */
import { encodeCursor } from '../src/common/pagination';
import { bearer, bootstrapAdmin, createKey, createTenant, startApp, TestApp } from './support/app';
import { DEVICE_GRANT, deviceTokens } from './support/device-flow';
import { expectError } from './support/envelope';
import { waitFor } from './support/wait';

interface Listed {
  id: string;
  client_id: string;
  client_name: string;
  user_id: string;
  scope: string;
  created_at: string;
  expires_at: string | null;
}

const SCOPES = ['openid', 'offline_access', 'core.note:read'];

describe('the users who connected an OAuth client (/auth/clients/{client_id}/grants)', () => {
  let t: TestApp;
  let root: string;
  let acme: string;
  let other: string;
  let tv: string;
  const users: Record<'alice' | 'bob' | 'ops' | 'carol', { id: string; email: string; password: string }> = {} as never;

  const addUser = async (key: string, name: keyof typeof users) => {
    const user = { email: `${name}@example.com`, password: `a long password for ${name}` };
    const { id } = (await t.http.post('/users').set(bearer(key)).send({ ...user, name }).expect(201)).body;
    users[name] = { id, ...user };
  };
  const list = async (clientId: string, key: string, query: Record<string, string | number> = {}) =>
    (await t.http.get(`/auth/clients/${clientId}/grants`).query(query).set(bearer(key)).expect(200)).body as { grants: Listed[]; next_cursor: string | null };
  /** The user's grants as their admin reads them at /users/{id}/grants. */
  const grantsOf = async (key: string, userId: string) => (await t.http.get(`/users/${userId}/grants`).set(bearer(key)).expect(200)).body.grants as Array<Omit<Listed, 'user_id'>>;

  beforeAll(async () => {
    t = await startApp({ OAUTH_DEVICE_POLL_INTERVAL: '1' });
    root = (await bootstrapAdmin(t)).key;
    acme = (await createTenant(t, root, 'acme')).key;
    other = (await createTenant(t, root, 'other')).key;
    await addUser(acme, 'alice');
    await addUser(acme, 'bob');
    await addUser(root, 'ops');
    await addUser(other, 'carol');
    tv = (
      await t.http
        .post('/auth/clients')
        .set(bearer(acme))
        .send({ client_name: 'Team TV', grant_types: [DEVICE_GRANT, 'refresh_token'], token_endpoint_auth_method: 'none', scope: SCOPES.join(' ') })
        .expect(201)
    ).body.client_id;
  });
  afterAll(() => t?.close());

  it('lists the grants of the users who connected the app, newest first, each as the user\'s own list shows it with the user', async () => {
    expect(await list(tv, acme)).toEqual({ grants: [], next_cursor: null });
    await deviceTokens(t, tv, users.alice, SCOPES);
    const [alices] = await grantsOf(acme, users.alice.id);
    // Grants are dated in whole seconds: Bob's is a second newer.
    await waitFor(() => Date.now() >= Date.parse(alices.created_at) + 1000, 'the next second');
    await deviceTokens(t, tv, users.bob, ['core.note:read']);
    const [bobs] = await grantsOf(acme, users.bob.id);

    const all = await list(tv, acme);
    expect(all).toEqual({ grants: [{ ...bobs, user_id: users.bob.id }, { ...alices, user_id: users.alice.id }], next_cursor: null });
    expect(all.grants.map((g) => [g.client_id, g.client_name])).toEqual([
      [tv, 'Team TV'],
      [tv, 'Team TV'],
    ]);
    expect(alices.scope.split(' ').sort()).toEqual([...SCOPES].sort());
    expect(bobs.scope).toBe('core.note:read');
  });

  it('pages the list a grant at a time, with cursors of this list only', async () => {
    const all = await list(tv, acme);
    expect(all.grants).toHaveLength(2);
    const first = await list(tv, acme, { limit: 1 });
    expect(first.grants).toEqual([all.grants[0]]);
    expect(first.next_cursor).toEqual(expect.any(String));
    const second = await list(tv, acme, { limit: 1, cursor: first.next_cursor! });
    expect(second).toEqual({ grants: [all.grants[1]], next_cursor: null });

    // The position of the first page's end, as this list and as a user's list would name it.
    const [end] = first.grants;
    const position = { createdAt: end.created_at, id: end.id };
    expect((await list(tv, acme, { cursor: encodeCursor(position, 'client_grants') })).grants).toEqual([all.grants[1]]);
    const spare = (await t.http.post('/auth/clients').set(bearer(acme)).send({ client_name: 'Spare', grant_types: ['client_credentials'] }).expect(201)).body.client_id as string;
    expect(await list(spare, acme)).toEqual({ grants: [], next_cursor: null });
    const clientsCursor = (await t.http.get('/auth/clients?limit=1').set(bearer(acme)).expect(200)).body.next_cursor as string;
    for (const cursor of ['nonsense', encodeCursor(position, 'grants'), clientsCursor]) {
      expectError(await t.http.get(`/auth/clients/${tv}/grants`).query({ cursor }).set(bearer(acme)), 400, 'validation_error');
    }
    for (const limit of [0, 101, 'many']) {
      expectError(await t.http.get(`/auth/clients/${tv}/grants`).query({ limit }).set(bearer(acme)), 400, 'validation_error');
    }
  });

  it('refuses members, other tenants\' admins (the root tenant\'s too), unknown clients and malformed ids', async () => {
    const member = (await createKey(t, acme, { label: 'member', type_permissions: { '*': 'read' } })).key;
    expectError(await t.http.get(`/auth/clients/${tv}/grants`), 401, 'unauthorized');
    expectError(await t.http.get(`/auth/clients/${tv}/grants`).set(bearer(member)), 403, 'forbidden');
    for (const key of [other, root]) {
      expectError(await t.http.get(`/auth/clients/${tv}`).set(bearer(key)), 404, 'not_found');
      expectError(await t.http.get(`/auth/clients/${tv}/grants`).set(bearer(key)), 404, 'not_found');
    }
    expectError(await t.http.get('/auth/clients/nosuchclient/grants').set(bearer(acme)), 404, 'not_found');
    for (const bad of ['not%20a%20client', 'a'.repeat(101)]) {
      expect(expectError(await t.http.get(`/auth/clients/${bad}/grants`).set(bearer(acme)), 400, 'invalid_id').details).toEqual({ field: 'client_id' });
    }
  });

  it('leaves out a grant once revoked, and one whose lifetime is over', async () => {
    const before = await list(tv, acme);
    const alices = before.grants.find((g) => g.user_id === users.alice.id)!;
    await t.http.delete(`/users/${users.alice.id}/grants/${alices.id}`).set(bearer(acme)).expect(200);
    const after = await list(tv, acme);
    expect(after.grants.map((g) => g.user_id)).toEqual([users.bob.id]);

    await t.sql(`UPDATE oidc_models SET expires_at = now() - interval '1 second' WHERE model = 'Grant' AND id = $1`, [after.grants[0].id]);
    expect(await list(tv, acme)).toEqual({ grants: [], next_cursor: null });
  });

  it('an openly registered app: a root-tenant admin sees the root tenant\'s users who connected it, never another tenant\'s; a tenant\'s admin cannot read it', async () => {
    const open = (
      await t.http
        .post('/auth/oauth2/register')
        .send({ client_name: 'Open TV', grant_types: [DEVICE_GRANT, 'refresh_token'], response_types: [], token_endpoint_auth_method: 'none', scope: SCOPES.join(' ') })
        .expect(201)
    ).body.client_id as string;
    for (const user of [users.alice, users.ops, users.carol]) await deviceTokens(t, open, user, SCOPES);

    const listed = await list(open, root);
    expect(listed.grants.map((g) => [g.user_id, g.client_name])).toEqual([[users.ops.id, 'Open TV']]);
    expect(listed.next_cursor).toBeNull();
    for (const key of [acme, other]) {
      expectError(await t.http.get(`/auth/clients/${open}`).set(bearer(key)), 404, 'not_found');
      expectError(await t.http.get(`/auth/clients/${open}/grants`).set(bearer(key)), 404, 'not_found');
    }
    // The other tenants' users keep their grants: they are theirs to see.
    expect((await grantsOf(acme, users.alice.id)).map((g) => g.client_id)).toEqual([open]);
    expect((await grantsOf(other, users.carol.id)).map((g) => g.client_id)).toEqual([open]);
  });

  it('is in the OpenAPI document, for admins, paged', async () => {
    const doc = (await t.http.get('/openapi.json').expect(200)).body;
    const op = doc.paths['/auth/clients/{client_id}/grants'].get;
    expect(op.operationId).toBe('listClientGrants');
    expect(op.parameters.map((p: { name: string }) => p.name)).toEqual(expect.arrayContaining(['client_id', 'cursor', 'limit']));
    expect(Object.keys(op.responses)).toEqual(expect.arrayContaining(['200', '400', '401', '403', '404']));
  });
});
