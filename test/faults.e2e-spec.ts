/**
 * Dependency faults while the service runs, with the real PostgreSQL and Redis behind TCP
 * proxies the tests control (the shared servers are never touched): PostgreSQL ending every
 * connection (a restart or failover), PostgreSQL going silent on its open connections (a hung
 * server or a network that drops packets), and the Redis subscription of the event streams
 * going away and coming back.
 */
import { Client } from 'pg';
import { bearer, bootstrapAdmin, createKey, PG_SERVER, TestApp } from './support/app';
import { appBehindProxy, redisUp } from './support/behind-proxy';
import { expectError } from './support/envelope';
import { SseClient } from './support/sse';
import { waitFor } from './support/wait';

jest.setTimeout(60_000);

/**
 * Notes written through `writer` by its root admin, and an item.created stream of them opened
 * on `reader` (added to `streams`, for the describe to close): `ids` are the streamed items'.
 */
async function notesStreamed(writer: TestApp, reader: TestApp, streams: SseClient[]) {
  const admin = (await bootstrapAdmin(writer)).key;
  const note = async (title: string): Promise<string> =>
    (await writer.http.post('/items').set(bearer(admin)).send({ type: 'core.note', properties: { title } }).expect(201)).body.id;
  const s = await SseClient.open(`${reader.url}/events?events=item.created`, bearer(admin));
  streams.push(s);
  return { note, s, ids: (): string[] => s.named().map((e) => e.body.item.id) };
}

describe('PostgreSQL faults', () => {
  const at = appBehindProxy(['postgres']);
  let admin: string;
  beforeAll(async () => {
    admin = (await bootstrapAdmin(at.t)).key;
  });

  const note = (title: string) => at.t.http.post('/items').set(bearer(admin)).send({ type: 'core.note', properties: { title } });
  const search = (q: string) => at.t.http.get('/search').query({ q }).set(bearer(admin));

  it('keeps serving when PostgreSQL ends every connection (a restart): no pool is left with a dead one, nothing crashes', async () => {
    expect((await note('before the restart')).status).toBe(201);
    expect((await search('restart')).status).toBe(200);
    const database = new URL(at.t.databaseUrl).pathname.slice(1);
    const killer = new Client({ connectionString: `${PG_SERVER}/postgres` });
    await killer.connect();
    try {
      const { rowCount } = await killer.query('SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1', [database]);
      expect(rowCount).toBeGreaterThan(0);
    } finally {
      await killer.end();
    }
    await waitFor(async () => (await search('restart')).status === 200 && (await note('after the restart')).status === 201, 'searches and writes again');
    for (let i = 0; i < 10; i++) {
      expect((await search('restart')).status).toBe(200);
      expect((await note(`after ${i}`)).status).toBe(201);
    }
  });

  it('cuts the connections whose server stopped answering, and serves again with new ones', async () => {
    // Every pool holds a few open connections, then they all go silent.
    await Promise.all(Array.from({ length: 8 }, (_, i) => Promise.all([note(`warm ${i}`), search('warm')])));
    at.pg.stall();
    const round = () => Promise.all([...Array.from({ length: 8 }, () => at.t.http.get('/items').set(bearer(admin))), ...Array.from({ length: 4 }, () => search('stall'))]);
    // A request that drew a silent connection fails after the read timeout, as a 503 to retry;
    // that connection is then gone, so each one costs one failure, and the pools fill with new ones.
    const stalled = await round();
    expect(stalled.some((res) => res.status === 503)).toBe(true);
    for (const res of stalled) {
      if (res.status === 200) continue;
      expect([res.status, res.body.error.code, res.headers['retry-after']]).toEqual([503, 'service_unavailable', '2']);
    }
    await waitFor(async () => (await round()).every((r) => r.status === 200), 'every request answered again', 40_000, 200);
    expect((await note('after the stall')).status).toBe(201);
  });
});

describe('the event streams\' Redis subscription lost and back', () => {
  const streams: SseClient[] = [];
  afterAll(() => streams.forEach((s) => s.close())); // before the app closes
  const at = appBehindProxy(['redis']);

  it('catches open streams up on what was published meanwhile, in order, without repeats, and stays live', async () => {
    const { t, redis } = at;
    const { note, ids, s } = await notesStreamed(t, t, streams);
    const first = await note('before');
    await waitFor(() => ids().length === 1, 'the live event');

    await redis.cut();
    const meanwhile = [await note('while away 1'), await note('while away 2')];
    await redis.restore();
    await waitFor(() => ids().length === 3, 'the events published while the subscription was away');
    const after = await note('after');
    await waitFor(() => ids().length === 4, 'the next live event');
    expect(ids()).toEqual([first, ...meanwhile, after]);
    expect(s.closed).toBe(false);
  });
});

describe('a key revoked while one instance has lost Redis', () => {
  // The other instance's Redis connection never drops.
  const at = appBehindProxy(['redis'], {}, [{}]);

  it('is answered 200 (it is committed), and refused on every instance once Redis takes the change', async () => {
    const { t: cut, redis, others: [other] } = at;
    const admin = (await bootstrapAdmin(cut)).key;
    const member = await createKey(cut, admin, { role: 'member', type_permissions: { '*': 'read' } });
    for (let i = 0; i < 2; i++) await other.http.get('/items').set(bearer(member.key)).expect(200); // cached on the other instance

    await redis.cut();
    const revoked = await cut.http.delete(`/keys/${member.id}`).set(bearer(admin));
    expect(revoked.status).toBe(200);
    expect(revoked.body.revoked_at).not.toBeNull();
    await redis.restore();
    await waitFor(async () => (await other.http.get('/items').set(bearer(member.key))).status === 401, 'the key refused on the other instance', 10_000, 200);
    expect((await cut.http.get('/items').set(bearer(member.key))).status).toBe(401);
  });
});

describe('a type changed while one instance has lost its subscription', () => {
  const at = appBehindProxy(['redis'], {}, [{}]);

  it('is seen by that instance once the subscription is back, not when its cached catalogue expires', async () => {
    const { t: cut, redis, others: [other] } = at;
    const admin = (await bootstrapAdmin(cut)).key;
    for (const type of [{ name: 'acme.base' }, { name: 'other.root' }, { name: 'zz.sub', parent: 'acme.base' }]) {
      await other.http.post('/types').set(bearer(admin)).send({ ...type, schema: { type: 'object' } }).expect(201);
    }
    // Write on acme.base and its subtypes: the catalogue says which types those are.
    const member = (await createKey(cut, admin, { role: 'member', type_permissions: { 'acme.base.*': 'write' } })).key;
    const sub = () => cut.http.post('/items').set(bearer(member)).send({ type: 'zz.sub', properties: {} });
    expect((await sub()).status).toBe(201); // the catalogue is cached on `cut` now

    await redis.cut();
    // Made again under another parent on the other instance: its notice never reaches `cut`.
    await other.http.delete('/types/zz.sub').set(bearer(admin)).expect(409); // it has an item
    await cut.sql(`DELETE FROM items WHERE type = 'zz.sub'`);
    await other.http.delete('/types/zz.sub').set(bearer(admin)).expect(200);
    await other.http.post('/types').set(bearer(admin)).send({ name: 'zz.sub', parent: 'other.root', schema: { type: 'object' } }).expect(201);
    await redis.restore();
    // The catalogue lives 60 s; the lost notice must not keep the old parent that long.
    await waitFor(async () => (await sub()).status === 400, 'zz.sub outside acme.base.* on the instance that lost Redis', 10_000, 200);
    expectError(await sub(), 400, 'invalid_type');
  });
});

describe('rate limits while Redis is away', () => {
  const at = appBehindProxy(['redis'], { RATE_LIMIT_ENABLED: 'true', RATE_LIMIT_REQUESTS: '5' });

  it('are counted in memory at once: the headers stay, the limit holds, and the window counts in Redis again once it is back', async () => {
    const { t, redis } = at;
    const admin = (await bootstrapAdmin(t)).key;
    const write = () => t.http.post('/tenants').set(bearer(admin)).send({});
    expect((await write()).headers['x-ratelimit-remaining']).toBe('4');

    await redis.cut();
    const remaining: string[] = [];
    for (let i = 0; i < 5; i++) remaining.push((await write()).headers['x-ratelimit-remaining']);
    expect(remaining).toEqual(['4', '3', '2', '1', '0']);
    const refused = await write();
    expect([refused.status, refused.body.error.code]).toEqual([429, 'rate_limited']);
    expect(Number(refused.headers['retry-after'])).toBeGreaterThanOrEqual(1);

    await redis.restore();
    // Back in Redis, the window holds the one request counted there before the cut.
    await waitFor(async () => (await write()).headers['x-ratelimit-remaining'] === '3', 'the count in Redis again', 10_000, 100);
  });
});

describe('a bearer token that cannot be checked (PostgreSQL away)', () => {
  const at = appBehindProxy(['postgres'], { RATE_LIMIT_ENABLED: 'true', RATE_LIMIT_REQUESTS: '5' });

  it('is 503 service_unavailable with Retry-After, counted by the rate limit like any request (SPEC 8.1: its headers too)', async () => {
    const { t, pg } = at;
    await bootstrapAdmin(t);
    await pg.cut();
    try {
      // A key no instance has cached: only PostgreSQL could say whether it is good.
      const res = await t.http.get('/items').set(bearer('svc_k1_neverseenbeforeneverseenbeforeneverseenbefore00'));
      expect([res.status, res.body.error?.code]).toEqual([503, 'service_unavailable']);
      expect(res.headers['retry-after']).toMatch(/^\d+$/);
      expect([res.headers['x-ratelimit-limit'], res.headers['x-ratelimit-remaining']]).toEqual(['10', '9']);
    } finally {
      await pg.restore();
    }
  });
});

describe('the OAuth endpoints while PostgreSQL is away', () => {
  const at = appBehindProxy(['postgres']);
  let key: string;
  beforeAll(async () => {
    key = (await bootstrapAdmin(at.t)).key;
  });

  it('answer 503 temporarily_unavailable with Retry-After in their own error form, not 500 server_error, and serve again after', async () => {
    const { t, pg } = at;
    const client = (await t.http.post('/auth/clients').set(bearer(key)).send({ grant_types: ['client_credentials'], scope: 'core.note:read' }).expect(201)).body;
    const token = () => t.http.post('/auth/oauth2/token').auth(client.client_id, client.client_secret).type('form').send({ grant_type: 'client_credentials', scope: 'core.note:read' });
    expect((await token()).status).toBe(200);
    await pg.cut();
    try {
      for (const res of [await token(), await t.http.post('/auth/oauth2/introspect').auth(client.client_id, client.client_secret).type('form').send({ token: 'svc_at_x' })]) {
        expect([res.status, res.body.error, res.headers['retry-after']]).toEqual([503, 'temporarily_unavailable', expect.stringMatching(/^\d+$/)]);
      }
    } finally {
      await pg.restore();
    }
    await waitFor(async () => (await token()).status === 200, 'tokens again');
  });

  it('answer 503 temporarily_unavailable, not 500, when PostgreSQL cancels their statement at its timeout', async () => {
    const { t } = at;
    const client = (await t.http.post('/auth/clients').set(bearer(key)).send({ grant_types: ['client_credentials'], scope: 'core.note:read' }).expect(201)).body;
    const token = () => t.http.post('/auth/oauth2/token').auth(client.client_id, client.client_secret).type('form').send({ grant_type: 'client_credentials', scope: 'core.note:read' });
    expect((await token()).status).toBe(200);
    // A session of its own holds the provider's table past the statement timeout (1 s here).
    const holder = new Client({ connectionString: `${PG_SERVER}${new URL(t.databaseUrl).pathname}` });
    await holder.connect();
    try {
      await holder.query('BEGIN');
      await holder.query('LOCK TABLE oidc_models IN ACCESS EXCLUSIVE MODE');
      for (const res of [await token(), await t.http.post('/auth/oauth2/introspect').auth(client.client_id, client.client_secret).type('form').send({ token: 'svc_at_x' })]) {
        expect([res.status, res.body.error, res.headers['retry-after']]).toEqual([503, 'temporarily_unavailable', expect.stringMatching(/^\d+$/)]);
      }
    } finally {
      await holder.query('ROLLBACK');
      await holder.end();
    }
    expect((await token()).status).toBe(200);
  });
});

describe('an Idempotency-Key whose request failed with PostgreSQL', () => {
  const at = appBehindProxy(['postgres']);

  it('is free for the retry once PostgreSQL is back, though the failed request could not release it then', async () => {
    const { t, pg } = at;
    const { key } = await bootstrapAdmin(t);
    const body = { type: 'core.note', source_id: 'idem-lock', properties: { title: 'held' } };
    expect((await t.http.post('/items').set(bearer(key)).send(body)).status).toBe(201);
    const database = new URL(t.databaseUrl).pathname.slice(1);
    // A session of its own, not through the proxy, holds the item while the request waits for it.
    const holder = new Client({ connectionString: `${PG_SERVER}/${database}` });
    await holder.connect();
    try {
      await holder.query('BEGIN');
      await holder.query(`SELECT 1 FROM items WHERE source_id = 'idem-lock' FOR UPDATE`);
      const send = () => t.http.post('/items').set(bearer(key)).set('Idempotency-Key', 'after-the-outage').send({ ...body, properties: { title: 'again' } });
      const first = send().then((res) => res); // sent now: a supertest request goes out once awaited
      await waitFor(async () => (await holder.query(`SELECT 1 FROM pg_stat_activity WHERE datname = $1 AND wait_event_type = 'Lock'`, [database])).rowCount! > 0, 'the request waiting for the lock');
      await pg.cut();
      expect((await first).status).toBe(503);
      await holder.query('ROLLBACK');
      await pg.restore();
      const retry = await send();
      expect([retry.status, retry.body.properties?.title]).toEqual([200, 'again']);
    } finally {
      await holder.end();
    }
  });
});

describe('events an instance could not publish (it had lost Redis)', () => {
  // The reader's Redis connection never drops, and it relays nothing itself.
  const streams: SseClient[] = [];
  afterAll(() => streams.forEach((s) => s.close())); // before the apps close
  const at = appBehindProxy(['redis'], {}, [{ EVENT_DELIVERY_ENABLED: 'false' }]);

  it('reach the streams of other instances, in order, once Redis is back, with no later batch needed', async () => {
    const { t: writer, redis, others: [reader] } = at;
    const { note, ids, s } = await notesStreamed(writer, reader, streams);
    const first = await note('before');
    await waitFor(() => ids().length === 1, 'the live event');

    await redis.cut();
    const unpublished = await note('while the writer had lost Redis');
    await redis.restore();
    await redisUp(writer);
    await waitFor(() => ids().length === 2, 'the unpublished event');
    const after = await note('after');
    await waitFor(() => ids().length === 3, 'the next one');
    expect(ids()).toEqual([first, unpublished, after]);
    expect(s.closed).toBe(false);
  });
});

describe('a resume (Last-Event-ID) while PostgreSQL is away', () => {
  const at = appBehindProxy(['postgres']);

  it('is 503 with Retry-After before the stream starts, not a stream that starts over with stream.reset', async () => {
    const { t, pg } = at;
    const { key } = await bootstrapAdmin(t);
    const created = await t.http.post('/items').set(bearer(key)).send({ type: 'core.note', properties: { title: 'to resume after' } }).expect(201);
    const [{ id }] = await t.sql<{ id: string }>(`SELECT id FROM events WHERE payload->'item'->>'id' = $1`, [created.body.id]);
    await waitFor(async () => (await t.sql(`SELECT 1 FROM events WHERE id = $1 AND published_seq IS NOT NULL`, [id])).length > 0, 'the event published');
    await t.http.get('/items').set(bearer(key)).expect(200); // the key cached: only the resume needs PostgreSQL
    await pg.cut();
    try {
      const res = await t.http.get('/events').set(bearer(key)).set('Last-Event-ID', id);
      expect([res.status, res.body.error?.code, res.headers['retry-after']]).toEqual([503, 'service_unavailable', expect.stringMatching(/^\d+$/)]);
    } finally {
      await pg.restore();
    }
    const s = await SseClient.open(`${t.url}/events`, { ...bearer(key), 'Last-Event-ID': id });
    try {
      expect(s.status).toBe(200);
    } finally {
      s.close();
    }
  });
});
