/**
 * The account pages' lists, `/auth/grants` and `/auth/sessions`, page as the API's lists do:
 * `limit` (1–100, default 50) and `cursor` / `next_cursor`, newest first, each row once over the
 * pages, ties of one second ordered by id; a bad `limit` or `cursor` is 400 validation_error
 * naming it (after the sign-in check); the HTML pages link to their next page. Only the signed-in
 * user's rows appear, whatever cursor they send. Grants and sessions are real: each comes from a
 * sign-in and consent on the provider's pages.
 */
import { createHash } from 'node:crypto';
import request from 'supertest';
import { bearer, bootstrapAdmin, createTenant, startApp, TestApp } from './support/app';
import { field } from './support/browse';
import { CodeClient, connect } from './support/code-flow';
import { badFields, expectError } from './support/envelope';

const password = 'a long enough password';
const redirectUri = 'https://app.example.com/callback';
const scope = 'openid core.note:read';

type Agent = ReturnType<typeof request.agent>;
type Page<K extends string> = { [key in K]: Array<{ id: string }> } & { next_cursor: string | null };

describe('account lists, paged (/auth/grants, /auth/sessions)', () => {
  let t: TestApp;
  let admin: string;
  let ann: { id: string };
  let bob: { id: string };
  let annPages: Agent;
  let bobPages: Agent;
  let clients: CodeClient[];

  const registerApp = async (key: string, name: string): Promise<CodeClient> => ({
    ...(await t.http.post('/auth/clients').set(bearer(key)).send({ client_name: name, redirect_uris: [redirectUri], grant_types: ['authorization_code', 'refresh_token'], scope }).expect(201)).body,
    redirect_uri: redirectUri,
    scope,
  });
  const createUser = async (key: string, email: string) => (await t.http.post('/users').set(bearer(key)).send({ email, password, name: 'User' }).expect(201)).body as { id: string };
  /** A fresh browser signed in to the account pages as `email`. */
  const accountPages = async (email: string) => {
    const agent = request.agent(t.url);
    const form = await agent.get('/auth/sign-in?return_to=/auth/grants').expect(200);
    await agent.post('/auth/sign-in').type('form').send({ return_to: '/auth/grants', csrf: field(form.text, 'csrf'), email, password }).expect(303);
    return agent;
  };
  const json = (agent: Agent, path: string, query: Record<string, string | number> = {}) => agent.get(path).query(query).set('Accept', 'application/json');
  /** Every page of `path` at `limit`, following next_cursor: the ids in order, and how many pages. */
  const allPages = async <K extends 'grants' | 'sessions'>(agent: Agent, path: string, key: K, limit: number) => {
    const ids: string[] = [];
    let pages = 0;
    let cursor: string | null = null;
    do {
      const body: Page<K> = (await json(agent, path, { limit, ...(cursor ? { cursor } : {}) }).expect(200)).body;
      expect(body[key].length).toBeLessThanOrEqual(limit);
      ids.push(...body[key].map((r) => r.id));
      cursor = body.next_cursor;
      pages++;
    } while (cursor);
    return { ids, pages };
  };
  /** The user's grants in the order the lists promise: newest issued second first, then by id, descending. */
  const grantOrder = async (userId: string) =>
    (
      await t.sql<{ id: string }>(
        `SELECT id FROM oidc_models WHERE model = 'Grant' AND payload->>'accountId' = $1 ORDER BY (payload->>'iat')::bigint DESC, id DESC`,
        [userId],
      )
    ).map((r) => r.id);
  /** The user's sessions as listed: by their shown id (a digest of theirs), newest sign-in first, then by that id, descending. */
  const sessionOrder = async (userId: string) =>
    (await t.sql<{ id: string; signed_in: string }>(`SELECT id, payload->>'loginTs' AS signed_in FROM oidc_models WHERE model = 'Session' AND payload->>'accountId' = $1`, [userId]))
      .map((r) => ({ id: createHash('sha256').update(`session-view:${r.id}`).digest('base64url'), signedIn: Number(r.signed_in) }))
      .sort((x, y) => y.signedIn - x.signedIn || (x.id < y.id ? 1 : -1))
      .map((r) => r.id);

  beforeAll(async () => {
    t = await startApp();
    admin = (await bootstrapAdmin(t)).key;
    const other = (await createTenant(t, admin, 'other')).key;
    [ann, bob] = [await createUser(admin, 'ann@lists.example'), await createUser(admin, 'bob@lists.example')];
    await createUser(other, 'cat@lists.example');
    clients = [];
    for (const n of [1, 2, 3, 4, 5]) clients.push(await registerApp(admin, `App ${n}`));
    // Ann connects five apps (five grants), each from a browser of its own (five sessions); Bob one, and Cat, of another tenant, one of hers.
    for (const client of clients) await connect(t, client, 'ann@lists.example', password);
    await connect(t, clients[0], 'bob@lists.example', password);
    await connect(t, await registerApp(other, 'Their app'), 'cat@lists.example', password);
    // Three of Ann's grants and sessions in one second, so that pages break ties by id.
    for (const [model, key] of [['Grant', 'iat'], ['Session', 'loginTs']]) {
      await t.sql(
        `UPDATE oidc_models SET payload = jsonb_set(payload, $3::text[], to_jsonb(1800000000 - CASE WHEN n <= 3 THEN 0 ELSE n END))
           FROM (SELECT id AS row_id, row_number() OVER (ORDER BY id) AS n FROM oidc_models WHERE model = $1 AND payload->>'accountId' = $2) r
          WHERE model = $1 AND id = r.row_id`,
        [model, ann.id, `{${key}}`],
      );
    }
    [annPages, bobPages] = [await accountPages('ann@lists.example'), await accountPages('bob@lists.example')];
  });
  afterAll(() => t?.close());

  it('pages the user\'s grants newest first, ties by id, each once, with next_cursor null on the last page; 50 by default', async () => {
    const expected = await grantOrder(ann.id);
    expect(expected).toHaveLength(5);
    for (const limit of [1, 2, 3, 5]) {
      const { ids, pages } = await allPages(annPages, '/auth/grants', 'grants', limit);
      expect([limit, ids]).toEqual([limit, expected]);
      expect(pages).toBe(Math.ceil(5 / limit));
    }
    const whole = (await json(annPages, '/auth/grants').expect(200)).body;
    expect(whole.grants.map((g: { id: string }) => g.id)).toEqual(expected);
    expect(whole.next_cursor).toBeNull();
    expect(Object.keys(whole.grants[0]).sort()).toEqual(['client_id', 'client_name', 'created_at', 'expires_at', 'id', 'scope']);
    // The admins' list of the same grants pages alike.
    const adminPages: string[] = [];
    let cursor: string | null = null;
    do {
      const body: Page<'grants'> = (await t.http.get(`/users/${ann.id}/grants`).query({ limit: 2, ...(cursor ? { cursor } : {}) }).set(bearer(admin)).expect(200)).body;
      adminPages.push(...body.grants.map((g) => g.id));
      cursor = body.next_cursor;
    } while (cursor);
    expect(adminPages).toEqual(expected);
  });

  it('pages the user\'s sessions newest sign-in first, ties by their shown id, each once; 50 by default', async () => {
    const expected = await sessionOrder(ann.id);
    expect(expected).toHaveLength(5);
    for (const limit of [1, 2, 4]) {
      const { ids, pages } = await allPages(annPages, '/auth/sessions', 'sessions', limit);
      expect([limit, ids]).toEqual([limit, expected]);
      expect(pages).toBe(Math.ceil(5 / limit));
    }
    const whole = (await json(annPages, '/auth/sessions').expect(200)).body;
    expect(whole.sessions.map((s: { id: string }) => s.id)).toEqual(expected);
    expect(whole.next_cursor).toBeNull();
    expect(whole.sessions[0]).toMatchObject({ id: expected[0], signed_in_at: new Date(1_800_000_000_000).toISOString() });
    expect(Object.keys(whole.sessions[0]).sort()).toEqual(['expires_at', 'id', 'signed_in_at']);
  });

  it('shows only the signed-in user\'s rows, whatever cursor is sent: another user\'s, or another tenant\'s, never appear', async () => {
    const annGrants = new Set(await grantOrder(ann.id));
    const annSessions = new Set(await sessionOrder(ann.id));
    const bobGrants = await grantOrder(bob.id);
    const bobSessions = await sessionOrder(bob.id);
    expect([bobGrants.length, bobSessions.length]).toEqual([1, 1]);
    expect((await allPages(bobPages, '/auth/grants', 'grants', 1)).ids).toEqual(bobGrants);
    expect((await allPages(bobPages, '/auth/sessions', 'sessions', 1)).ids).toEqual(bobSessions);
    // Ann's cursors are positions, not her rows: from them Bob gets his own, older ones or none.
    const annGrantCursor = (await json(annPages, '/auth/grants', { limit: 1 }).expect(200)).body.next_cursor;
    const annSessionCursor = (await json(annPages, '/auth/sessions', { limit: 1 }).expect(200)).body.next_cursor;
    const fromThere = [
      ...(await json(bobPages, '/auth/grants', { cursor: annGrantCursor }).expect(200)).body.grants,
      ...(await json(bobPages, '/auth/sessions', { cursor: annSessionCursor }).expect(200)).body.sessions,
    ].map((r: { id: string }) => r.id);
    for (const id of fromThere) expect([...bobGrants, ...bobSessions]).toContain(id);
    for (const id of [...bobGrants, ...bobSessions]) expect([annGrants.has(id), annSessions.has(id)]).toEqual([false, false]);
    // Cat's (another tenant's) rows are in none of Ann's or Bob's pages, which hold exactly their own (above).
    const catGrants = await t.sql<{ id: string }>(`SELECT g.id FROM oidc_models g JOIN users u ON u.id::text = g.payload->>'accountId' WHERE g.model = 'Grant' AND u.email = 'cat@lists.example'`);
    expect(catGrants).toHaveLength(1);
    expect([...annGrants, ...bobGrants]).not.toContain(catGrants[0].id);
  });

  it('refuses a bad limit or cursor (400 validation_error naming it), after the sign-in check', async () => {
    const grantCursor = (await json(annPages, '/auth/grants', { limit: 1 }).expect(200)).body.next_cursor;
    const sessionCursor = (await json(annPages, '/auth/sessions', { limit: 1 }).expect(200)).body.next_cursor;
    for (const [path, list] of [['/auth/grants', 'grants'], ['/auth/sessions', 'sessions']]) {
      for (const limit of ['0', '101', '-1', '1.5', 'ten', '']) expect([path, limit, badFields(await json(annPages, path, { limit }))]).toEqual([path, limit, ['limit']]);
      expect(badFields(await annPages.get(`${path}?limit=1&limit=2`).set('Accept', 'application/json'))).toEqual(['limit']);
      // Not one, and one as the list would issue but for a fraction of a second, which it never does.
      for (const cursor of ['nope', Buffer.from(JSON.stringify(['2026-01-01T00:00:00.500Z', 'x'.repeat(43), list])).toString('base64url')]) {
        expect(badFields(await json(annPages, path, { cursor }))).toEqual(['cursor']);
      }
      // A browser's page is refused alike.
      expectError(await annPages.get(path).query({ limit: 0 }), 400, 'validation_error');
      // Signed out, the sign-in check answers first.
      expectError(await json(request.agent(t.url), path, { limit: 0 }), 401, 'unauthorized');
      // Other parameters a page may get (a link's) are left alone.
      await json(annPages, path, { utm_source: 'mail' }).expect(200);
    }
    // A cursor of the other list is not one of this list's.
    expect(badFields(await json(annPages, '/auth/grants', { cursor: sessionCursor }))).toEqual(['cursor']);
    expect(badFields(await json(annPages, '/auth/sessions', { cursor: grantCursor }))).toEqual(['cursor']);
  });

  it('the HTML pages show a page at a time, linking to the next', async () => {
    const names = (html: string) => [...html.matchAll(/<strong>(App \d)<\/strong>/g)].map((m) => m[1]);
    const first = await annPages.get('/auth/grants').query({ limit: 2 }).expect(200);
    expect(names(first.text)).toHaveLength(2);
    const next = /<a href="([^"]+)">Older connected apps<\/a>/.exec(first.text)![1].replace(/&amp;/g, '&');
    expect(new URL(next, t.url).searchParams.get('limit')).toBe('2');
    const second = await annPages.get(next).expect(200);
    expect(names(second.text)).toHaveLength(2);
    expect(names(second.text).filter((n) => names(first.text).includes(n))).toEqual([]);
    const all = await annPages.get('/auth/grants').expect(200);
    expect(names(all.text)).toHaveLength(5);
    expect(all.text).not.toContain('Older connected apps');

    const sessions = await annPages.get('/auth/sessions').query({ limit: 4 }).expect(200);
    expect(sessions.text.match(/<li>Signed in /g)).toHaveLength(4);
    const rest = /<a href="([^"]+)">Older sessions<\/a>/.exec(sessions.text)![1].replace(/&amp;/g, '&');
    expect((await annPages.get(rest).expect(200)).text.match(/<li>Signed in /g)).toHaveLength(1);
  });
});
