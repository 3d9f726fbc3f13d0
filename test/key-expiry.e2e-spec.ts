/**
 * API keys' `expires_at` and `last_used_at`, on two instances sharing one database and Redis:
 * validation, PATCH setting and removing an expiry, an expired key refused as a revoked one is
 * on every instance although cached (KEY_CACHE_TTL_SECONDS at its default), its event stream
 * closed and its webhook silent, the last admin key that does not expire kept, expiry judged by
 * the database's clock for use, change and a new expiry (POST, PATCH, the account page's form)
 * alike, and last use written once a minute at most.
 * Another tenant's key stays 404.
 */
import request from 'supertest';
import { bearer, bootstrapAdmin, createKey, createTenant, startApp, TestApp } from './support/app';
import { field } from './support/browse';
import { withClockSkew } from './support/clock';
import { badFields, expectError } from './support/envelope';
import { expectKeyBody } from './support/keys';
import { Receiver } from './support/receiver';
import { SseClient } from './support/sse';
import { waitFor } from './support/wait';

describe('key expiry and last use (e2e, two instances)', () => {
  let a: TestApp;
  let b: TestApp;
  let admin: string;
  const streams: SseClient[] = [];
  const receiver = new Receiver();
  let base: string;

  const inSeconds = (s: number) => new Date(Date.now() + s * 1000).toISOString();
  const keyRow = async (id: string) =>
    (await a.sql<{ last_used_at: Date | null; xmin: string }>('SELECT last_used_at, xmin::text FROM api_keys WHERE id = $1', [id]))[0];

  beforeAll(async () => {
    a = await startApp();
    b = await startApp({ DATABASE_URL: a.databaseUrl, REDIS_PREFIX: a.config.REDIS_PREFIX });
    // The first key of a server is the root tenant's only admin key: it cannot expire.
    expect(badFields(await a.http.post('/keys').send({ expires_at: inSeconds(3600) }))).toEqual(['expires_at']);
    expect(await a.sql('SELECT 1 FROM api_keys')).toHaveLength(0);
    admin = (await bootstrapAdmin(a)).key;
    base = await receiver.start();
  });
  afterAll(async () => {
    streams.forEach((s) => s.close());
    await receiver.stop();
    await b?.app.close();
    await a?.close();
    await b?.close();
  });

  it('takes an expiry in the future, at most about 10 years ahead; both fields are null until set', async () => {
    const plain = await createKey(a, admin, {});
    expectKeyBody(plain, true);
    expect(plain).toMatchObject({ expires_at: null, last_used_at: null });
    const at = new Date(Date.now() + 86_400_000);
    const dated = await createKey(a, admin, { expires_at: at.toISOString().replace('Z', '+00:00') });
    expect(dated.expires_at).toBe(at.toISOString());
    expect((await a.http.get(`/keys/${dated.id}`).set(bearer(admin)).expect(200)).body.expires_at).toBe(at.toISOString());
    expect((await createKey(a, admin, { expires_at: null })).expires_at).toBeNull();
    for (const expires_at of [inSeconds(-1), new Date().toISOString().slice(0, 19) + 'Z', inSeconds(3660 * 86_400), '2030-01-01', 'soon', 5]) {
      expect(badFields(await a.http.post('/keys').set(bearer(admin)).send({ expires_at }))).toEqual(['expires_at']);
      expect(badFields(await a.http.patch(`/keys/${plain.id}`).set(bearer(admin)).send({ expires_at }))).toEqual(['expires_at']);
    }
  });

  it('PATCH sets an expiry, and null removes it; another tenant\'s key is 404', async () => {
    const k = await createKey(a, admin, { label: 'patched' });
    const at = inSeconds(3600);
    const set = await a.http.patch(`/keys/${k.id}`).set(bearer(admin)).send({ expires_at: at }).expect(200);
    expectKeyBody(set.body, false);
    expect(set.body.expires_at).toBe(at);
    expect((await a.http.get('/keys').set(bearer(admin)).expect(200)).body.keys.find((x: { id: string }) => x.id === k.id).expires_at).toBe(at);
    await b.http.get('/items').set(bearer(k.key)).expect(200);
    const removed = await a.http.patch(`/keys/${k.id}`).set(bearer(admin)).send({ expires_at: null }).expect(200);
    expect(removed.body.expires_at).toBeNull();
    expect((await b.http.get('/keys/current').set(bearer(k.key)).expect(200)).body.expires_at).toBeNull();

    const other = await createTenant(a, admin, 'expiry-other');
    expectError(await a.http.patch(`/keys/${k.id}`).set(bearer(other.key)).send({ expires_at: at }), 404, 'not_found');
    expectError(await a.http.get(`/keys/${k.id}`).set(bearer(other.key)), 404, 'not_found');
    expect((await a.http.get(`/keys/${k.id}`).set(bearer(admin)).expect(200)).body.expires_at).toBeNull();
  });

  it('keeps a tenant\'s last admin key that does not expire: giving it an expiry is 409 until another exists', async () => {
    const other = await createTenant(a, admin, 'expiry-admins');
    const first = (await a.http.get('/keys/current').set(bearer(other.key)).expect(200)).body;
    expectError(await a.http.patch(`/keys/${first.id}`).set(bearer(other.key)).send({ expires_at: inSeconds(3600) }), 409, 'conflict');
    // An admin key that expires does not count: it would leave the tenant without one in time.
    const expiring = await createKey(a, other.key, { role: 'admin', expires_at: inSeconds(3600) });
    expectError(await a.http.delete(`/keys/${first.id}`).set(bearer(expiring.key)), 409, 'conflict');
    await createKey(a, other.key, { role: 'admin' });
    const ok = await a.http.patch(`/keys/${first.id}`).set(bearer(other.key)).send({ expires_at: inSeconds(3600) }).expect(200);
    expect(ok.body.expires_at).not.toBeNull();
  });

  it('refuses a key from its expiry on, on every instance, although cached; its stream closes and its webhook gets nothing more', async () => {
    const k = await createKey(a, admin, { label: 'short-lived', type_permissions: { '*': 'read' }, expires_at: inSeconds(6) });
    // Cached on both instances (the default KEY_CACHE_TTL_SECONDS outlives the key).
    await a.http.get('/keys/current').set(bearer(k.key)).expect(200);
    await b.http.get('/keys/current').set(bearer(k.key)).expect(200);
    const hook = (await a.http.post('/webhooks').set(bearer(k.key)).send({ url: `${base}/expiring`, events: ['item.created'] }).expect(201)).body;
    const stream = await SseClient.open(`${b.url}/events`, bearer(k.key));
    streams.push(stream);
    expect(stream.status).toBe(200);
    const note = (title: string) => a.http.post('/items').set(bearer(admin)).send({ type: 'core.note', properties: { title } }).expect(201);
    const titles = () => stream.named().filter((e) => e.body.item).map((e) => e.body.item.properties.title);
    await note('before-expiry');
    await waitFor(() => titles().includes('before-expiry') && receiver.at('/expiring').length === 1, 'the event on the stream and the webhook');

    // Polled on both instances until refused (never a fixed sleep): the cache must not outlive the expiry.
    for (const t of [a, b]) await waitFor(async () => (await t.http.get('/keys/current').set(bearer(k.key))).status === 401, 'the key to be refused', 15_000);
    expect(Date.now()).toBeGreaterThanOrEqual(Date.parse(k.expires_at));
    for (const t of [a, b]) expectError(await t.http.get('/items').set(bearer(k.key)), 401, 'unauthorized');
    await waitFor(() => stream.closed, 'the stream to close');

    await note('after-expiry');
    await waitFor(async () => (await a.sql('SELECT 1 FROM events WHERE dispatched_at IS NULL')).length === 0, 'the relay');
    expect(titles()).not.toContain('after-expiry');
    expect(receiver.at('/expiring')).toHaveLength(1);
    expect((await a.http.get(`/webhooks/${hook.id}/deliveries`).set(bearer(admin)).expect(200)).body.deliveries).toHaveLength(1);

    // Still listed, with its expiry; not changeable; revocable.
    const listed = (await a.http.get('/keys').set(bearer(admin)).expect(200)).body.keys.find((x: { id: string }) => x.id === k.id);
    expect(listed).toMatchObject({ expires_at: k.expires_at, revoked_at: null });
    expectError(await a.http.patch(`/keys/${k.id}`).set(bearer(admin)).send({ expires_at: inSeconds(3600) }), 409, 'conflict');
    expect((await a.http.delete(`/keys/${k.id}`).set(bearer(admin)).expect(200)).body.revoked_at).not.toBeNull();
  });

  it('judges expiry by the database\'s clock alike when a key authenticates and when it is changed, whatever the server\'s own clock says', async () => {
    // Expired a minute ago, and expiring in a minute, by the database's clock (neither used yet, so cached nowhere).
    const expired = await createKey(a, admin, { label: 'expired by the database' });
    const live = await createKey(a, admin, { label: 'live by the database' });
    await a.sql(`UPDATE api_keys SET expires_at = now() - interval '1 minute' WHERE id = $1`, [expired.id]);
    await a.sql(`UPDATE api_keys SET expires_at = now() + interval '1 minute' WHERE id = $1`, [live.id]);
    /** The answers to using and to changing `key` while this process's clock is `skewMs` off the database's. */
    const bothPaths = (key: Record<string, any>, skewMs: number) =>
      withClockSkew(skewMs, async () => {
        const used = (await a.http.get('/keys/current').set(bearer(key.key))).status;
        const changed = (await a.http.patch(`/keys/${key.id}`).set(bearer(admin)).send({ label: `${key.label}, changed` })).status;
        return [used, changed];
      });
    // A server clock two minutes slow would still call the first one live, two minutes fast the second one expired.
    expect(await bothPaths(expired, -120_000)).toEqual([401, 409]);
    expect(await bothPaths(live, 120_000)).toEqual([200, 200]);
    expect((await a.http.get(`/keys/${expired.id}`).set(bearer(admin)).expect(200)).body.label).toBe('expired by the database');
  });

  it('judges a new expiry by the database\'s clock too, on POST /keys, PATCH /keys/{id} and the account page\'s key form, whatever the server\'s own clock says', async () => {
    // A minute ahead of, and a minute behind, the database's clock.
    const [{ ahead, behind }] = await a.sql<{ ahead: Date; behind: Date }>(`SELECT now() + interval '1 minute' AS ahead, now() - interval '1 minute' AS behind`);
    // A server clock two minutes fast would call the first one past, two minutes slow the second one future.
    const made = await withClockSkew(120_000, () => a.http.post('/keys').set(bearer(admin)).send({ label: 'ahead of a fast clock', expires_at: ahead.toISOString() }));
    expect([made.status, made.body.expires_at]).toEqual([201, ahead.toISOString()]);
    expect(badFields(await withClockSkew(-120_000, () => a.http.post('/keys').set(bearer(admin)).send({ label: 'behind a slow clock', expires_at: behind.toISOString() })))).toEqual(['expires_at']);
    const k = await createKey(a, admin, { label: 'changed under skew' });
    const changed = await withClockSkew(120_000, () => a.http.patch(`/keys/${k.id}`).set(bearer(admin)).send({ expires_at: ahead.toISOString() }));
    expect([changed.status, changed.body.expires_at]).toEqual([200, ahead.toISOString()]);
    expect(badFields(await withClockSkew(-120_000, () => a.http.patch(`/keys/${k.id}`).set(bearer(admin)).send({ expires_at: behind.toISOString() })))).toEqual(['expires_at']);

    // The account page's form, which checks the expiry before it makes the key, by the same rule.
    const tenant = await createTenant(a, admin, 'expiry-form');
    await a.http.post('/users').set(bearer(tenant.key)).send({ email: 'form@expiry.example', password: 'an admin user password', name: 'Form', role: 'admin' }).expect(201);
    const agent = request.agent(a.url);
    const signIn = await agent.get('/auth/sign-in?return_to=/auth/security').expect(200);
    await agent.post('/auth/sign-in').type('form').send({ return_to: '/auth/security', csrf: field(signIn.text, 'csrf'), email: 'form@expiry.example', password: 'an admin user password' }).expect(303);
    const send = async (label: string, expires_at: Date) => {
      const page = (await agent.get('/auth/security').expect(200)).text;
      return agent.post('/auth/keys').type('form').send({ csrf: field(page, 'csrf'), form_nonce: field(page, 'form_nonce'), label, expires_at: expires_at.toISOString() });
    };
    const labelled = async (label: string) => a.sql<{ expires_at: Date }>(`SELECT expires_at FROM api_keys WHERE tenant_id = $1 AND label = $2`, [tenant.tenantId, label]);
    expect((await withClockSkew(120_000, () => send('form ahead', ahead))).status).toBe(200);
    expect((await labelled('form ahead')).map((r) => r.expires_at.toISOString())).toEqual([ahead.toISOString()]);
    const refused = await withClockSkew(-120_000, () => send('form behind', behind));
    expect(refused.status).toBe(400);
    expect(refused.text).toContain('The expiry must be in the future.');
    expect(await labelled('form behind')).toEqual([]);
  });

  it('notes last use, at most once a minute per key, on any instance', async () => {
    const k = await createKey(a, admin, {});
    expect((await a.http.get(`/keys/${k.id}`).set(bearer(admin)).expect(200)).body.last_used_at).toBeNull();
    await a.http.get('/keys/current').set(bearer(k.key)).expect(200);
    // waitFor takes any value but undefined and false: null (not written yet) is waited past.
    const first = await waitFor(async () => ((await a.http.get(`/keys/${k.id}`).set(bearer(admin)).expect(200)).body.last_used_at as string | null) ?? undefined, 'last_used_at');
    const row = await keyRow(k.id);
    // Within the minute: neither the instance that wrote it nor the other writes it again.
    await b.http.get('/keys/current').set(bearer(k.key)).expect(200);
    await a.http.get('/items').set(bearer(k.key)).expect(200);
    await b.http.get('/items').set(bearer(k.key)).expect(200);
    const again = (await b.http.get(`/keys/${k.id}`).set(bearer(admin)).expect(200)).body;
    expect(again.last_used_at).toBe(first);
    expect(await keyRow(k.id)).toEqual(row); // not even rewritten with the same value

    // A minute later (moved back here rather than waited for), the next use on an instance that has not written it within the minute writes it.
    const fresh = await createKey(a, admin, {});
    await a.http.get('/items').set(bearer(fresh.key)).expect(200);
    await waitFor(async () => (await keyRow(fresh.id)).last_used_at ?? undefined, 'the first use noted');
    await a.sql(`UPDATE api_keys SET last_used_at = last_used_at - interval '2 minutes' WHERE id = $1`, [fresh.id]);
    const backdated = (await keyRow(fresh.id)).last_used_at!;
    await b.http.get('/items').set(bearer(fresh.key)).expect(200);
    await waitFor(async () => (await keyRow(fresh.id)).last_used_at! > backdated, 'the later use noted');
  });

  it('GET /keys lists by status (expiry by the database\'s clock), role and last use, each page filtered, with 400 for a bad filter', async () => {
    const t = await createTenant(a, admin, 'key-filters');
    const ids = async (query: Record<string, string | number>): Promise<string[]> => {
      const seen: string[] = [];
      let cursor: string | undefined;
      do {
        const page = (await a.http.get('/keys').query({ ...query, limit: 2, ...(cursor && { cursor }) }).set(bearer(t.key)).expect(200)).body;
        seen.push(...page.keys.map((k: { id: string }) => k.id));
        cursor = page.next_cursor ?? undefined;
      } while (cursor);
      return seen.sort();
    };
    const tenantAdmin = (await a.http.get('/keys/current').set(bearer(t.key)).expect(200)).body.id as string;
    const member = await createKey(a, t.key, { role: 'member' });
    const revoked = await createKey(a, t.key, { role: 'member' });
    await a.http.delete(`/keys/${revoked.id}`).set(bearer(t.key)).expect(200);
    const expiring = await createKey(a, t.key, { role: 'admin', expires_at: inSeconds(3600) });
    const expired = await createKey(a, t.key, { role: 'member', expires_at: inSeconds(3600) });
    // Time passes for this one: its expiry moves back rather than being waited for.
    await a.sql(`UPDATE api_keys SET expires_at = now() - interval '1 second' WHERE id = $1`, [expired.id]);
    const sorted = (...list: string[]) => list.sort();

    expect(await ids({})).toEqual(sorted(tenantAdmin, member.id, revoked.id, expiring.id, expired.id));
    expect(await ids({ status: 'active' })).toEqual(sorted(tenantAdmin, member.id, expiring.id));
    expect(await ids({ status: 'revoked' })).toEqual([revoked.id]);
    expect(await ids({ status: 'expired' })).toEqual([expired.id]);
    expect(await ids({ role: 'member' })).toEqual(sorted(member.id, revoked.id, expired.id));
    expect(await ids({ role: 'admin', status: 'active' })).toEqual(sorted(tenantAdmin, expiring.id));
    // The server's clock ahead of the database's does not make a key expired.
    await withClockSkew(2 * 3600_000, async () => expect(await ids({ status: 'expired' })).toEqual([expired.id]));

    const adminUsedAt = await waitFor(async () => (await keyRow(tenantAdmin)).last_used_at ?? undefined, 'the admin key\'s use noted');
    await a.http.get('/keys/current').set(bearer(member.key)).expect(200);
    const memberUsedAt = await waitFor(async () => (await keyRow(member.id)).last_used_at ?? undefined, 'the member key\'s use noted');
    const never = [revoked.id, expiring.id, expired.id];
    expect(await ids({ last_used_before: adminUsedAt.toISOString() })).toEqual(sorted(...never));
    expect(await ids({ last_used_before: new Date(memberUsedAt.getTime() + 1).toISOString() })).toEqual(sorted(tenantAdmin, member.id, ...never));

    for (const query of [{ status: 'all' }, { status: '' }, { role: 'owner' }, { last_used_before: 'yesterday' }, { status: ['active', 'revoked'] }]) {
      expect(badFields(await a.http.get('/keys').query(query).set(bearer(t.key)))).toEqual(Object.keys(query));
    }
  });
});
