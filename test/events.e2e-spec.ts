/**
 * The server-sent event stream (`GET /events`) with two instances on one database and Redis:
 * events written on one reach streams on the other, filtered by the query and by what the
 * credential may read; Last-Event-ID resumes without gaps or repeats, in the order streams saw
 * events live even when transactions commit in another order than they wrote, with both
 * instances relaying, and across the migration that introduced that order; an unknown id gets
 * `stream.reset`; heartbeats; a revoked key's stream is closed; an item's edges only as far as the
 * credential may read them; an OAuth token's stream keeps to the token's scopes; open streams are
 * capped per credential and per tenant across both instances. Also: the outbox holds one
 * event per change, with the credential that caused it, and events past EVENT_RETENTION_DAYS
 * leave it (a Last-Event-ID naming one then gets `stream.reset`).
 */
import Redis from 'ioredis';
import { connect, Socket } from 'node:net';
import { DataSource, QueryRunner } from 'typeorm';
import type { Principal } from '../src/auth/principal';
import { EventPublishOrder1732300002200 } from '../src/database/migrations/1732300002200-event-publish-order';
import { EventsFirstPublishedSeq1732300002800 } from '../src/database/migrations/1732300002800-events-first-published-seq';
import { EventStream } from '../src/events/event-stream';
import { EventsJanitor } from '../src/events/events-janitor';
import { Outbox } from '../src/events/outbox';
import { MAX_STREAMS_PER_CREDENTIAL, MAX_STREAMS_PER_TENANT } from '../src/events/stream-slots';
import { bearer, bootstrapAdmin, createKey, createTenant, startApp, TestApp } from './support/app';
import { badFields, expectError } from './support/envelope';
import { SseClient } from './support/sse';
import { appBehindProxy, redisUp } from './support/behind-proxy';
import { waitFor } from './support/wait';

describe('event stream (e2e, two instances)', () => {
  let a: TestApp;
  let b: TestApp;
  let admin: string;
  let root: { id: string; tenantId: string };
  const streams: SseClient[] = [];
  const rawSockets: Socket[] = [];

  const open = async (app: TestApp, key: string, query = '', headers: Record<string, string> = {}) => {
    const s = await SseClient.open(`${app.url}/events${query}`, { ...bearer(key), ...headers });
    streams.push(s);
    return s;
  };
  const note = (title: string, key = admin) => a.http.post('/items').set(bearer(key)).send({ type: 'core.note', properties: { title } }).expect(201);
  const titles = (s: SseClient) => s.named().filter((e) => e.body.item).map((e) => e.body.item.properties.title);
  /** A GET /events that should be refused: its status and error envelope (a stream that opens anyway is closed at once). */
  const refused = async (app: TestApp, key: string) => {
    const res = await fetch(`${app.url}/events`, { headers: bearer(key) });
    if (res.ok) {
      await res.body?.cancel();
      return { status: res.status, contentType: '', retryAfter: null, body: undefined as any };
    }
    return { status: res.status, contentType: res.headers.get('content-type') ?? '', retryAfter: res.headers.get('retry-after'), body: (await res.json()) as any };
  };

  beforeAll(async () => {
    a = await startApp({ EVENTS_HEARTBEAT_SECONDS: '1' });
    b = await startApp({ DATABASE_URL: a.databaseUrl, REDIS_PREFIX: a.config.REDIS_PREFIX, EVENTS_HEARTBEAT_SECONDS: '1' });
    const bootstrapped = await bootstrapAdmin(a);
    admin = bootstrapped.key;
    root = bootstrapped;
  });
  afterAll(async () => {
    streams.forEach((s) => s.close());
    rawSockets.forEach((s) => s.destroy());
    await b?.app.close();
    await a?.close();
    await b?.close();
  });

  it('answers HEAD with the stream\'s headers and ends', async () => {
    const res = await b.http.head('/events').set(bearer(admin)).expect(200);
    expect(res.headers['content-type']).toMatch(/^text\/event-stream/);
  });

  it('needs a credential and valid filters', async () => {
    expectError(await b.http.get('/events'), 401, 'unauthorized');
    expect(badFields(await b.http.get('/events?events=item.exploded').set(bearer(admin)))).toEqual(['events']);
    expect(badFields(await b.http.get('/events?type_filter=Bad!').set(bearer(admin)))).toEqual(['type_filter']);
    // Entries listed twice, refused as a webhook's are.
    expect(badFields(await b.http.get('/events?events=item.*,item.*&type_filter=core.note,core.note').set(bearer(admin)))).toEqual(['events', 'type_filter']);
    expect(badFields(await b.http.get(`/events?lastEventId=${'x'.repeat(201)}`).set(bearer(admin)))).toEqual(['lastEventId']);
  });

  it('refuses an empty type_filter, as POST /webhooks does, and a repeated parameter, saying to give it once', async () => {
    // An empty list would select no item event, or read as every type.
    for (const query of ['?type_filter=,', '?type_filter=', '?type_filter=%20,%20']) {
      expect(badFields(await b.http.get(`/events${query}`).set(bearer(admin)))).toEqual(['type_filter']);
    }
    const repeated = expectError(await b.http.get('/events?events=item.created&events=edge.created').set(bearer(admin)), 400, 'validation_error');
    expect(repeated.details!.fields).toEqual([{ field: 'events', message: 'give events once, as one comma-separated list' }]);
    const repeatedTypes = expectError(await b.http.get('/events?type_filter=core.note&type_filter=acme.*').set(bearer(admin)), 400, 'validation_error');
    expect(repeatedTypes.details!.fields).toEqual([{ field: 'type_filter', message: 'give type_filter once, as one comma-separated list' }]);
    const long = expectError(await b.http.get(`/events?events=${'item.created,'.repeat(200)}`).set(bearer(admin)), 400, 'validation_error');
    expect(long.details!.fields).toEqual([{ field: 'events', message: 'must be at most 2000 characters' }]);
    // As a webhook's lists: no empty entry, at most MAX_SUBSCRIPTION_PATTERNS.
    for (const query of ['?type_filter=core.note,,core.task', '?events=item.created,', `?type_filter=${Array.from({ length: 51 }, (_, i) => `acme.t${i}`).join(',')}`]) {
      expect(badFields(await b.http.get(`/events${query}`).set(bearer(admin)))).toEqual([query.slice(1, query.indexOf('='))]);
    }
    // An empty entry is refused in the words every comma list of the API uses (GET /items' and GET /search's tags too).
    for (const [query, field] of [['?type_filter=core.note,,core.task', 'type_filter'], ['?type_filter=', 'type_filter'], ['?events=item.created,', 'events'], ['?events=', 'events']]) {
      const gapped = expectError(await b.http.get(`/events${query}`).set(bearer(admin)), 400, 'validation_error');
      expect([query, gapped.details!.fields]).toEqual([query, [{ field, message: `give ${field} as a comma-separated list without empty entries ("a,b", not "a,,b", "a," or "")` }]]);
    }
  });

  it('delivers events written on one instance to a stream on the other, with heartbeats', async () => {
    const s = await open(b, admin);
    expect(s.status).toBe(200);
    expect(s.contentType).toMatch(/^text\/event-stream/);
    const item = (await note('across')).body;
    await waitFor(() => titles(s).includes('across'), 'the event on the other instance');
    const [e] = s.named();
    expect(e).toMatchObject({ event: 'item.created', id: expect.any(String), body: { event: 'item.created', item: { id: item.id } } });
    await a.http.patch(`/items/${item.id}`).set(bearer(admin)).send({ version: 1, properties: { title: 'changed' } }).expect(200);
    await a.http.delete(`/items/${item.id}`).set(bearer(admin)).expect(200);
    await waitFor(() => s.named().length === 3, 'the update and the state change');
    expect(s.named().map((x) => x.event)).toEqual(['item.created', 'item.updated', 'item.state_changed']);
    expect(s.named()[2].body.item.state).toBe('trashed');
    await waitFor(() => s.comments.includes('heartbeat'), 'a heartbeat');
    s.close();
  });

  it('filters by events and type_filter, and by what the credential may read', async () => {
    const member = (await createKey(a, admin, { label: 'sse-member', type_permissions: { 'core.note': 'read' } })).key;
    const notesOnly = await open(b, member);
    const tasksOnly = await open(b, admin, '?events=item.created&type_filter=core.task');
    const other = await open(b, (await createTenant(a, admin, 'sse-other')).key);
    await a.http.post('/items').set(bearer(admin)).send({ type: 'core.task', properties: { title: 'task' } }).expect(201);
    await note('visible');
    await waitFor(() => titles(notesOnly).includes('visible') && titles(tasksOnly).includes('task'), 'both streams');
    await note('last');
    await waitFor(() => titles(notesOnly).includes('last'), 'the last event');
    expect(titles(notesOnly)).toEqual(['visible', 'last']);
    expect(titles(tasksOnly)).toEqual(['task']);
    expect(other.named()).toEqual([]);
    [notesOnly, tasksOnly, other].forEach((s) => s.close());
  });

  it('resumes after Last-Event-ID on either instance without gaps or repeats; an unknown id gets stream.reset', async () => {
    const first = await open(a, admin);
    await note('r1');
    await waitFor(() => titles(first).includes('r1'), 'r1');
    const lastId = first.named().at(-1)!.id!;
    first.close();
    await note('r2');
    await note('r3');
    const resumed = await open(b, admin, '', { 'Last-Event-ID': lastId });
    await note('r4');
    await waitFor(() => titles(resumed).includes('r4'), 'r4 live');
    expect(titles(resumed)).toEqual(['r2', 'r3', 'r4']);
    // As event-source-polyfill resumes: the id in the query (the header, when sent too, wins).
    const byQuery = await open(a, admin, `?lastEventId=${lastId}`);
    const headerWins = await open(a, admin, `?lastEventId=00000000-0000-4000-8000-000000000000`, { 'Last-Event-ID': lastId });
    await waitFor(() => titles(byQuery).includes('r4') && titles(headerWins).includes('r4'), 'r4 by query');
    expect([titles(byQuery), titles(headerWins)]).toEqual([['r2', 'r3', 'r4'], ['r2', 'r3', 'r4']]);
    byQuery.close();
    headerWins.close();

    const reset = await open(b, admin, '', { 'Last-Event-ID': '00000000-0000-4000-8000-000000000000' });
    await note('after-reset');
    await waitFor(() => titles(reset).includes('after-reset'), 'live after reset');
    expect(reset.named()[0]).toMatchObject({ event: 'stream.reset', body: { reason: 'last_event_id_unknown' } });
    resumed.close();
    reset.close();
  });

  it('replays large events in pages of bounded bytes, in order, without gaps or repeats', async () => {
    const lastId = await markPosition('big start');
    // Twelve events of 0.9 MB: three pages of at most 4 MiB.
    const big = Array.from({ length: 12 }, (_, n) => `big ${n}`);
    for (const title of big) await a.http.post('/items').set(bearer(admin)).send({ type: 'core.note', properties: { title, body: 'x'.repeat(900_000) } }).expect(201);
    const resumed = await open(b, admin, '?events=item.created', { 'Last-Event-ID': lastId });
    await waitFor(() => titles(resumed).length === 12, 'the twelve replayed', 30_000);
    expect(titles(resumed)).toEqual(big);
    resumed.close();
  });

  it('replays only the events its `events` filter names, in order, the outbox reading no others', async () => {
    const lastId = await markPosition('named start');
    const live = await open(a, admin, '?events=item.*');
    const ids: string[] = [];
    for (const n of [1, 2]) {
      const created = (await note(`named ${n}`)).body as { id: string };
      await a.http.patch(`/items/${created.id}`).set(bearer(admin)).send({ version: 1, properties: { title: `named ${n} edited` } }).expect(200);
      ids.push(created.id);
    }
    await note('named 3');
    // All five published before the streams below resume: they come by replay, not live.
    await waitFor(() => titles(live).includes('named 3'), 'the five events published');
    live.close();

    // Every statement the replaying instance makes, with the rows each brought back.
    const query = jest.spyOn(b.app.get(DataSource), 'query');
    try {
      const updated = await open(b, admin, '?events=item.updated', { 'Last-Event-ID': lastId });
      const under = await open(b, admin, '?events=item.*', { 'Last-Event-ID': lastId });
      await waitFor(() => titles(updated).length === 2 && titles(under).length === 5, 'both replays');
      expect(updated.named().map((e) => [e.event, e.body.item.id, e.body.item.properties.title])).toEqual([
        ['item.updated', ids[0], 'named 1 edited'],
        ['item.updated', ids[1], 'named 2 edited'],
      ]);
      expect(titles(under)).toEqual(['named 1', 'named 1 edited', 'named 2', 'named 2 edited', 'named 3']);
      updated.close();
      under.close();

      const replayed = await Promise.all(
        query.mock.calls.flatMap(([sql], n) => (/published_seq > \$2::bigint/.test(sql) ? [query.mock.results[n].value as Promise<Array<{ name: string }>>] : [])),
      );
      const names = replayed.map((page) => page.map((e) => e.name).sort());
      expect(names.sort((x, y) => x.length - y.length)).toEqual([
        ['item.updated', 'item.updated'],
        ['item.created', 'item.created', 'item.created', 'item.updated', 'item.updated'],
      ]);
    } finally {
      query.mockRestore();
    }
  });

  it('streams events too large for a Redis message live, read from the outbox, in order, each message bounded', async () => {
    // Redis drops a subscriber whose unread messages pass its output buffer limit (32 MB).
    const listener = new Redis(a.config.REDIS_URL);
    const messages: string[] = [];
    listener.on('message', (_channel: string, message: string) => messages.push(message));
    await listener.subscribe(`${a.config.REDIS_PREFIX}events`);
    try {
      const s = await open(b, admin, '?events=item.created');
      const sizes = [10, 300_000, 10, 700_000, 900_000, 10];
      const written = await Promise.all(
        sizes.map(async (size, n) => (await a.http.post('/items').set(bearer(admin)).send({ type: 'core.note', properties: { title: `sized ${n}`, body: 'x'.repeat(size) } }).expect(201)).body.id),
      );
      await waitFor(() => s.named().filter((e) => written.includes(e.body.item.id)).length === sizes.length, 'every sized event');
      const got = s.named().filter((e) => written.includes(e.body.item.id));
      expect(got.map((e) => e.body.item.properties.body.length).sort((x, y) => x - y)).toEqual([...sizes].sort((x, y) => x - y));
      // In the publication order, which a resume follows too.
      const [{ ids }] = await a.sql<{ ids: string[] }>('SELECT array_agg(payload->\'item\'->>\'id\' ORDER BY published_seq) AS ids FROM events WHERE payload->\'item\'->>\'id\' = ANY($1) AND name = \'item.created\'', [written]);
      expect(got.map((e) => e.body.item.id)).toEqual(ids);
      // The three large ones went as references to the outbox (each event's id in the message).
      const [{ big }] = await a.sql<{ big: string[] }>('SELECT array_agg(id::text) AS big FROM events WHERE payload->\'item\'->>\'id\' = ANY($1) AND octet_length(payload::text) > 65536', [written]);
      expect(big).toHaveLength(3);
      const refs = messages.flatMap((m) => JSON.parse(m) as Array<{ id: string; ref?: true }>).filter((e) => e.ref);
      expect(refs.map((r) => r.id).sort()).toEqual([...big].sort());
      expect(Math.max(...messages.map((m) => Buffer.byteLength(m)))).toBeLessThanOrEqual(1024 * 1024);
      s.close();
    } finally {
      listener.disconnect();
    }
  });

  it('resumes without gaps after the event it names was taken up again (its relay died) and published at a later place, and no stream gets it twice', async () => {
    const first = await open(a, admin);
    const watching = await open(b, admin);
    await note('gap 1');
    await waitFor(() => titles(first).includes('gap 1') && titles(watching).includes('gap 1'), 'gap 1');
    const lastId = first.named().at(-1)!.id!;
    first.close();
    const later = await open(a, admin); // opened after gap 1 was published
    await note('gap 2');
    await note('gap 3');
    const relayed = (id: string) => a.sql(`SELECT 1 FROM events WHERE id = $1 AND dispatched_at IS NOT NULL`, [id]);
    const [{ id: gap3 }] = await a.sql<{ id: string }>(`SELECT id FROM events WHERE payload->'item'->'properties'->>'title' = 'gap 3'`);
    await waitFor(async () => (await relayed(gap3)).length === 1, 'gap 3 published');
    // As if the relay that published gap 1 had died before recording it: its lease lapses, and it is published again, numbered after gap 3.
    await a.sql(`UPDATE events SET dispatched_at = NULL, relay_lease_until = now() - interval '1 second' WHERE id = $1`, [lastId]);
    await waitFor(async () => (await relayed(lastId)).length === 1, 'gap 1 published again');
    const resumed = await open(b, admin, '', { 'Last-Event-ID': lastId });
    await note('gap 4');
    await waitFor(() => [resumed, watching, later].every((s) => titles(s).includes('gap 4')), 'gap 4 live');
    // Nothing after gap 1 is missed, and gap 1's second publication goes to no stream: each had it, or began after it.
    expect(titles(resumed)).toEqual(['gap 2', 'gap 3', 'gap 4']);
    expect(titles(watching)).toEqual(['gap 1', 'gap 2', 'gap 3', 'gap 4']);
    expect(titles(later)).toEqual(['gap 2', 'gap 3', 'gap 4']);
    [resumed, watching, later].forEach((s) => s.close());
  });

  /** An item event as a writer stores it, from a note's own event, with another title. */
  const storedEventLike = async (title: string) => {
    const template = (await note(`template for ${title}`)).body;
    const [row] = await a.sql<{ audience: any; payload: any }>(`SELECT audience, payload FROM events WHERE payload->'item'->>'id' = $1`, [template.id]);
    const payload = { ...row.payload, item: { ...row.payload.item, properties: { ...row.payload.item.properties, title } } };
    return { audience: row.audience, payload };
  };
  const seqOf = async (eventId: string) => (await a.sql<{ seq: string }>(`SELECT seq::text AS seq FROM events WHERE id = $1`, [eventId]))[0].seq;

  it('resumes in the order streams saw events live when a transaction commits after a later-numbered one', async () => {
    const late = await storedEventLike('ooo late');
    const only = (s: SseClient) => titles(s).filter((t) => t.startsWith('ooo '));
    const live = await open(b, admin);
    const early = await open(a, admin);
    // A writer's transaction holds its event (its `seq` taken) while another write commits and is streamed.
    const held = a.app.get(DataSource).createQueryRunner();
    await held.startTransaction();
    try {
      await a.app.get(Outbox).record(held.manager, { tenantId: root.tenantId, credentialId: root.id } as Principal, 'item.updated', late.audience, late.payload);
      await note('ooo overtakes');
      await waitFor(() => only(live).includes('ooo overtakes') && only(early).includes('ooo overtakes'), 'the later write live');
      await held.commitTransaction();
    } finally {
      if (held.isTransactionActive) await held.rollbackTransaction();
      await held.release();
    }
    const overtakes = early.named().at(-1)!;
    expect(overtakes.body.item.properties.title).toBe('ooo overtakes');
    early.close(); // left before the late commit was published

    await waitFor(() => only(live).includes('ooo late'), 'the late commit live');
    expect(only(live)).toEqual(['ooo overtakes', 'ooo late']);
    const lateEvent = live.named().at(-1)!;
    expect(lateEvent.body.item.properties.title).toBe('ooo late');
    expect(BigInt(await seqOf(lateEvent.id!))).toBeLessThan(BigInt(await seqOf(overtakes.id!))); // the writer's numbering disagrees with the stream's
    live.close();

    await note('ooo after');
    const fromOvertakes = await open(b, admin, '', { 'Last-Event-ID': overtakes.id! });
    const fromLate = await open(a, admin, '', { 'Last-Event-ID': lateEvent.id! });
    await note('ooo marker');
    await waitFor(() => only(fromOvertakes).includes('ooo marker') && only(fromLate).includes('ooo marker'), 'both resumed streams live');
    expect(only(fromOvertakes)).toEqual(['ooo late', 'ooo after', 'ooo marker']);
    expect(only(fromLate)).toEqual(['ooo after', 'ooo marker']);
    for (const s of [fromOvertakes, fromLate]) {
      const ids = s.named().map((e) => e.id);
      expect(new Set(ids).size).toBe(ids.length);
      s.close();
    }
  });

  it('streams and replays one order while both instances relay concurrent writes', async () => {
    // Its streams on a key of their own: a stream holds its credential's slot until its connection
    // is gone, so the admin key's cap can still be taken by the streams other tests just closed.
    const reader = (await createKey(a, admin, { label: 'one-order', type_permissions: { '*': 'read' } })).key;
    const watching = await open(a, reader, '?events=item.created');
    expect(watching.status).toBe(200);
    await note('conc anchor');
    await waitFor(() => titles(watching).includes('conc anchor'), 'the anchor');
    const anchor = watching.named().find((e) => e.body.item.properties.title === 'conc anchor')!;
    const written = Array.from({ length: 40 }, (_, n) => `conc ${n}`);
    await Promise.all(
      written.map((title, n) => (n % 2 ? a : b).http.post('/items').set(bearer(admin)).send({ type: 'core.note', properties: { title } }).expect(201)),
    );
    const concurrent = (s: SseClient) => titles(s).filter((t) => written.includes(t));
    await waitFor(() => concurrent(watching).length === written.length, 'every write live');
    const liveOrder = concurrent(watching);
    expect([...liveOrder].sort()).toEqual([...written].sort());

    const resumed = await open(b, reader, '?events=item.created', { 'Last-Event-ID': anchor.id! });
    expect(resumed.status).toBe(200);
    await note('conc marker');
    await waitFor(() => titles(resumed).includes('conc marker'), 'the resumed stream live');
    expect(concurrent(resumed)).toEqual(liveOrder);
    const stored = await a.sql<{ title: string }>(
      `SELECT payload->'item'->'properties'->>'title' AS title FROM events WHERE name = 'item.created' AND payload->'item'->'properties'->>'title' = ANY($1::text[]) ORDER BY published_seq`,
      [written],
    );
    expect(stored.map((r) => r.title)).toEqual(liveOrder);
    watching.close();
    resumed.close();
  });

  it('numbers the events relayed before the publication order existed in seq order, so their ids still resume', async () => {
    const s = await open(a, admin);
    for (const title of ['mig 1', 'mig 2', 'mig 3']) await note(title);
    await waitFor(() => titles(s).includes('mig 3'), 'the events before the migration');
    const first = s.named().find((e) => e.body.item.properties.title === 'mig 1')!;
    s.close();
    const pending = await storedEventLike('mig pending');
    const abandoned = await storedEventLike('mig abandoned');
    // Their templates' events relayed: the outbox holds only what this test puts there undispatched.
    await waitFor(async () => (await a.sql(`SELECT 1 FROM events WHERE dispatched_at IS NULL`)).length === 0, 'the relay idle');

    // The migration again, over this outbox, in one transaction, as the migrator runs it (the
    // later one that builds on its numbers reverted first, and applied again after it).
    const migration = new EventPublishOrder1732300002200();
    const later = new EventsFirstPublishedSeq1732300002800();
    const q = { query: (text: string, params?: unknown[]) => a.sql(text, params) } as unknown as QueryRunner;
    await a.sql('BEGIN');
    try {
      await later.down(q);
      await migration.down(q);
      // Never claimed, and claimed by a relay that died (its lease lapsed): what an outbox can hold mid-upgrade.
      await a.sql(
        `INSERT INTO events (tenant_id, id, name, credential_id, audience, payload, relay_lease_until)
         VALUES ($1, gen_random_uuid(), 'item.updated', $2, $3, $4, NULL), ($1, gen_random_uuid(), 'item.updated', $2, $5, $6, now() - interval '1 second')`,
        [root.tenantId, root.id, pending.audience, JSON.stringify(pending.payload), abandoned.audience, JSON.stringify(abandoned.payload)],
      );
      await migration.up(q);
      await later.up(q);
      const rows = await a.sql<{ title: string; seq: string; published_seq: string | null }>(
        `SELECT payload->'item'->'properties'->>'title' AS title, seq::text AS seq, published_seq::text AS published_seq FROM events ORDER BY events.seq`,
      );
      const numbered = rows.filter((r) => r.published_seq !== null);
      expect(numbered.map((r) => Number(r.published_seq))).toEqual(numbered.map((_, n) => n + 1));
      expect(rows.filter((r) => r.published_seq === null).map((r) => r.title)).toEqual(['mig pending']);
      expect(rows.at(-1)).toMatchObject({ title: 'mig abandoned', published_seq: String(numbered.length) });
      await a.sql('COMMIT');
    } catch (err) {
      await a.sql('ROLLBACK');
      throw err;
    }

    // The relay takes both leftover events up (numbering them again, after the rest) and publishes them.
    await waitFor(
      async () => (await a.sql(`SELECT 1 FROM events WHERE payload->'item'->'properties'->>'title' IN ('mig pending', 'mig abandoned') AND dispatched_at IS NOT NULL`)).length === 2,
      'the leftover events relayed',
    );
    const resumed = await open(b, admin, '', { 'Last-Event-ID': first.id! });
    await note('mig marker');
    await waitFor(() => titles(resumed).includes('mig marker'), 'the resumed stream live');
    expect(titles(resumed).filter((t) => t.startsWith('mig '))).toEqual(['mig 2', 'mig 3', 'mig pending', 'mig abandoned', 'mig marker']);
    resumed.close();
  });

  it('closes a revoked key\'s stream', async () => {
    const k = await createKey(a, admin, { label: 'revoked-stream', type_permissions: { '*': 'read' } });
    const s = await open(b, k.key);
    await note('before-revoke');
    await waitFor(() => titles(s).includes('before-revoke'), 'an event before revocation');
    await a.http.delete(`/keys/${k.id}`).set(bearer(admin)).expect(200);
    await note('after-revoke');
    await waitFor(() => s.closed, 'the stream to close');
    expect(titles(s)).not.toContain('after-revoke');
  });

  it('closes the stream of an OAuth access token revoked on its own (RFC 7009), while its client\'s other token streams on', async () => {
    const client = (await a.http.post('/auth/clients').set(bearer(admin)).send({ grant_types: ['client_credentials'], scope: 'core.note:read' }).expect(201)).body;
    const issue = async () =>
      (await a.http.post('/auth/oauth2/token').auth(client.client_id, client.client_secret).type('form')
        .send({ grant_type: 'client_credentials', scope: 'core.note:read' }).expect(200)).body.access_token as string;
    const revoked = await issue();
    const s = await open(b, revoked);
    const other = await open(b, await issue());
    await note('before-token-revoke');
    await waitFor(() => titles(s).includes('before-token-revoke') && titles(other).includes('before-token-revoke'), 'the event on both streams');
    await a.http.post('/auth/oauth2/revoke').auth(client.client_id, client.client_secret).type('form').send({ token: revoked }).expect(200);
    await note('after-token-revoke');
    await waitFor(() => titles(other).includes('after-token-revoke'), 'the event on the other token\'s stream');
    await waitFor(() => s.closed, 'the revoked token\'s stream to close');
    expect(titles(s)).not.toContain('after-token-revoke');
    other.close();
  });

  it('sends a narrowed key\'s stream only what the key may read from the moment the change is acknowledged', async () => {
    const k = await createKey(a, admin, { label: 'narrowed-stream', type_permissions: { '*': 'read' } });
    const s = await open(b, k.key);
    await note('before-narrowing');
    await waitFor(() => titles(s).includes('before-narrowing'), 'an event before the narrowing');
    await a.http.patch(`/keys/${k.id}`).set(bearer(admin)).send({ type_permissions: { 'core.task': 'read' } }).expect(200);
    await note('after-narrowing');
    await a.http.post('/items').set(bearer(admin)).send({ type: 'core.task', properties: { title: 'still readable' } }).expect(201);
    await waitFor(() => titles(s).includes('still readable'), 'the readable event after the narrowing');
    expect(titles(s)).not.toContain('after-narrowing');
    s.close();
  });

  it('sends an item\'s outgoing edges only as GET /items/{id} shows them: read on the edge type and on the target\'s type', async () => {
    await a.http.post('/edge-types').set(bearer(admin)).send({ name: 'secret.link', source_types: ['*'], target_types: ['*'] }).expect(201);
    const keys = {
      noEdges: (await createKey(a, admin, { label: 'edge-blind', type_permissions: { 'core.note': 'write' } })).key,
      noTarget: (await createKey(a, admin, { label: 'edge-no-target', type_permissions: { 'core.note': 'read' }, edge_permissions: { 'secret.link': 'read' } })).key,
      both: (await createKey(a, admin, { label: 'edge-both', type_permissions: { 'core.*': 'read' }, edge_permissions: { 'secret.*': 'read' } })).key,
      admin,
    };
    const streamsOf: Record<string, SseClient> = Object.fromEntries(await Promise.all(Object.entries(keys).map(async ([who, key]) => [who, await open(b, key, '?events=item.updated')])));
    const doc = (await a.http.post('/items').set(bearer(admin)).send({ type: 'core.document', properties: { title: 'target' } }).expect(201)).body;
    const linked = (await a.http.post('/items').set(bearer(admin)).send({ type: 'core.note', properties: { title: 'linking' }, edges: { 'secret.link': [doc.id] } }).expect(201)).body;
    await a.http.patch(`/items/${linked.id}`).set(bearer(admin)).send({ version: linked.version, properties: { title: 'linked' } }).expect(200);
    for (const [who, key] of Object.entries(keys)) {
      const s = streamsOf[who];
      await waitFor(() => titles(s).includes('linked'), `the update on ${who}'s stream`);
      const streamed = s.named().find((e) => e.body.item.id === linked.id)!.body.item;
      const fetched = (await b.http.get(`/items/${linked.id}`).set(bearer(key)).expect(200)).body;
      expect(streamed.edges).toEqual(fetched.edges);
      expect(streamed.edges).toEqual(who === 'both' || who === 'admin' ? { 'secret.link': [doc.id] } : {});
      expect(Object.keys(streamed)).toEqual(Object.keys(fetched).filter((k) => k in streamed)); // same fields, same order
    }
    expect(JSON.stringify(streamsOf.noEdges.events)).not.toContain(doc.id);
    Object.values(streamsOf).forEach((s) => s.close());
  });

  /** The id of a new event to resume after: what a test writes next comes after it. */
  const markPosition = async (title: string) => {
    const marker = await open(a, admin, '?events=item.created&type_filter=core.task');
    await a.http.post('/items').set(bearer(admin)).send({ type: 'core.task', properties: { title } }).expect(201);
    await waitFor(() => titles(marker).includes(title), 'the marking event');
    const mark = marker.named().at(-1)!.id!;
    marker.close();
    return mark;
  };
  /** Purges the type's items, deletes it, and makes its name again under a new type `parent`. */
  const remakeUnder = async (name: string, parent: string) => {
    await a.http.post('/items/bulk_action').set(bearer(admin)).send({ action: 'purge', filter: { type: name }, confirm: 'PURGE' }).expect(200);
    await a.http.delete(`/types/${name}`).set(bearer(admin)).expect(200);
    await a.http.post('/types').set(bearer(admin)).send({ name: parent, schema: { type: 'object' } }).expect(201);
    await a.http.post('/types').set(bearer(admin)).send({ name, parent, schema: { type: 'object' } }).expect(201);
  };

  it('replays an item\'s events to those its type\'s parents let read when they were written, not after the type name was made again under another parent', async () => {
    await a.http.post('/types').set(bearer(admin)).send({ name: 'zz.hr', parent: 'core.note', schema: { type: 'object' } }).expect(201);
    const member = (await createKey(a, admin, { label: 'acme-reader', type_permissions: { 'acme.*': 'read' } })).key;
    const mark = await markPosition('hr-mark');
    const secret = (await a.http.post('/items').set(bearer(admin)).send({ type: 'zz.hr', properties: { title: 'salary review' } }).expect(201)).body;
    await remakeUnder('zz.hr', 'acme.base');
    await a.http.post('/items').set(bearer(admin)).send({ type: 'zz.hr', properties: { title: 'now under acme' } }).expect(201);

    const resumed = await open(b, member, '', { 'Last-Event-ID': mark });
    await waitFor(() => titles(resumed).includes('now under acme'), 'the new type\'s item');
    expect(titles(resumed)).toEqual(['now under acme']);
    expect(JSON.stringify(resumed.events)).not.toContain(secret.id);
    resumed.close();
    const stored = await a.sql<{ audience: unknown }>(`SELECT audience FROM events WHERE payload->'item'->>'id' = $1`, [secret.id]);
    expect(stored.map((e) => e.audience)).toEqual([1, 2].map(() => ({ item_type: 'zz.hr', lineage: { 'zz.hr': ['core.note'] } })));
  });

  it('replays an item\'s outgoing edge to those its target type\'s parents let read when it was written, not after that type was made again under another parent', async () => {
    await a.http.post('/types').set(bearer(admin)).send({ name: 'zz.tgt', parent: 'core.note', schema: { type: 'object' } }).expect(201);
    await a.http.post('/edge-types').set(bearer(admin)).send({ name: 'zz.refers', source_types: ['*'], target_types: ['*'] }).expect(201);
    const member = (await createKey(a, admin, { label: 'acme-edge-reader', type_permissions: { 'core.task': 'read', 'acme.*': 'read' }, edge_permissions: { 'zz.refers': 'read' } })).key;
    const mark = await markPosition('tgt-mark');
    const target = (await a.http.post('/items').set(bearer(admin)).send({ type: 'zz.tgt', properties: { title: 'hidden target' } }).expect(201)).body;
    const source = (await a.http.post('/items').set(bearer(admin)).send({ type: 'core.task', properties: { title: 'links out' }, edges: { 'zz.refers': [target.id] } }).expect(201)).body;
    await remakeUnder('zz.tgt', 'acme.shelf');
    await a.http.post('/items').set(bearer(admin)).send({ type: 'core.task', properties: { title: 'after the remake' } }).expect(201);

    const resumed = await open(b, member, '?events=item.created', { 'Last-Event-ID': mark });
    await waitFor(() => titles(resumed).includes('after the remake'), 'the later item');
    const replayed = resumed.named().find((e) => e.body.item.id === source.id)!.body.item;
    expect(replayed.edges).toEqual({});
    expect(JSON.stringify(resumed.events)).not.toContain(target.id);
    resumed.close();
    const stored = await a.sql<{ audience: unknown }>(`SELECT audience FROM events WHERE name = 'item.created' AND payload->'item'->>'id' = $1`, [source.id]);
    expect(stored.map((e) => e.audience)).toEqual([{ item_type: 'core.task', lineage: { 'core.task': [], 'zz.tgt': ['core.note'] } }]);
  });

  it('keeps an OAuth token\'s stream to the token\'s scopes after the credential re-check, though its client has more', async () => {
    const client = (await a.http.post('/auth/clients').set(bearer(admin)).send({ grant_types: ['client_credentials'], scope: 'core.note:read core.document:read' }).expect(201)).body;
    const token = (
      await a.http.post('/auth/oauth2/token').auth(client.client_id, client.client_secret).type('form')
        .send({ grant_type: 'client_credentials', scope: 'core.note:read' }).expect(200)
    ).body.access_token as string;
    const doc = (await a.http.post('/items').set(bearer(admin)).send({ type: 'core.document', properties: { title: 'doc for the client' } }).expect(201)).body;
    expectError(await a.http.get(`/items/${doc.id}`).set(bearer(token)), 404, 'item_not_found');
    const s = await open(a, token);
    // The stream's credential re-check (it runs every 2 s) used to swap in the client's full scopes.
    await a.app.get(EventStream).recheckCredentials();
    await a.http.post('/items').set(bearer(admin)).send({ type: 'core.document', properties: { title: 'another doc' } }).expect(201);
    await note('for the token');
    await waitFor(() => titles(s).includes('for the token'), 'the note on the token\'s stream');
    expect(titles(s)).toEqual(['for the token']);
    expect(s.closed).toBe(false);
    s.close();
  });

  it(`caps open streams at ${MAX_STREAMS_PER_CREDENTIAL} per credential across instances: the next is 429 rate_limited, closing one makes room`, async () => {
    const key = (await createKey(a, admin, { label: 'many-streams', type_permissions: { '*': 'read' } })).key;
    const held: SseClient[] = [];
    for (let n = 0; n < MAX_STREAMS_PER_CREDENTIAL; n++) held.push(await open(n % 2 ? b : a, key));
    expect(held.map((s) => s.status)).toEqual(held.map(() => 200));
    for (const app of [a, b]) {
      const res = await refused(app, key);
      expect(res.status).toBe(429);
      expect(res.contentType).toMatch(/^application\/json/);
      expect(res.body).toEqual({ error: { code: 'rate_limited', message: expect.any(String), details: { limit: MAX_STREAMS_PER_CREDENTIAL, scope: 'credential', retry_after: expect.any(Number) } } });
      // SPEC 8.1: a 429 carries Retry-After, in seconds, as the envelope's retry_after says.
      expect(Number(res.retryAfter)).toBe(res.body.error.details.retry_after);
      expect(Number(res.retryAfter)).toBeGreaterThan(0);
      // HEAD answers as GET would, and takes no slot either way.
      expect((await app.http.head('/events').set(bearer(key))).status).toBe(429);
    }
    // Other credentials of the tenant are not held back by this one's streams; the held ones still work.
    expect((await open(b, (await createKey(a, admin, { label: 'one-stream', type_permissions: { '*': 'read' } })).key)).status).toBe(200);
    await note('while capped');
    await waitFor(() => held.every((s) => titles(s).includes('while capped')), 'the event on every held stream');

    held[1].close();
    const again = await waitFor(async () => {
      const s = await open(a, key);
      return s.status === 200 && s;
    }, 'a stream in the freed slot');
    await note('in the freed slot');
    await waitFor(() => titles(again).includes('in the freed slot'), 'the event on the new stream');
    expect((await refused(b, key)).status).toBe(429);
    held.forEach((s) => s.close());
    again.close();
  });

  /** A `GET /events` whose client reads the headers, then stops reading (its socket paused), as a stuck one does. */
  const stuckStream = async (app: TestApp, key: string) => {
    const { hostname, port } = new URL(app.url);
    const socket = connect(Number(port), hostname);
    rawSockets.push(socket);
    const client = { socket, received: '', closed: false };
    socket.on('data', (chunk: Buffer) => (client.received += chunk.toString('latin1')));
    socket.on('error', () => undefined); // the server's reset, seen once it reads again
    socket.on('close', () => (client.closed = true));
    socket.write(`GET /events HTTP/1.1\r\nHost: ${hostname}\r\nAuthorization: Bearer ${key}\r\n\r\n`);
    await waitFor(() => client.received.includes('\r\n\r\n'), 'the stream\'s headers');
    socket.pause();
    return client;
  };

  it('cuts off streams whose clients stopped reading once too far behind, their slots held until the connection is gone', async () => {
    const tenant = await createTenant(a, admin, 'sse-stuck');
    const stuck = await Promise.all(Array.from({ length: MAX_STREAMS_PER_CREDENTIAL }, () => stuckStream(a, tenant.key)));
    expect(stuck.map((c) => c.received.slice(0, 12))).toEqual(stuck.map(() => 'HTTP/1.1 200'));
    expect((await refused(a, tenant.key)).status).toBe(429);
    // Items of 0.9 MB, each sent to every stuck stream, until their slots are free: they used to be
    // given back while the connection lingered, holding its buffers (and as much again per batch).
    const freed: SseClient[] = [];
    for (let n = 0; n < 60 && freed.length < MAX_STREAMS_PER_CREDENTIAL; n++) {
      await a.http.post('/items').set(bearer(tenant.key)).send({ type: 'core.note', properties: { title: `stuck ${n}`, body: 'x'.repeat(900_000) } }).expect(201);
      for (let s = await open(a, tenant.key); s.status === 200; s = await open(a, tenant.key)) {
        freed.push(s);
        if (freed.length === MAX_STREAMS_PER_CREDENTIAL) break;
      }
    }
    expect(freed).toHaveLength(MAX_STREAMS_PER_CREDENTIAL);
    // Reading again, each stuck client finds its connection dropped: cut off, not politely ended
    // (that waits for the client to read, and keeps the connection).
    stuck.forEach((c) => c.socket.resume());
    await waitFor(() => stuck.every((c) => c.closed), 'every stuck connection to be gone');
    expect(stuck.filter((c) => c.received.endsWith('0\r\n\r\n'))).toEqual([]);
    freed.forEach((s) => s.close());
  });

  it(`caps open streams at ${MAX_STREAMS_PER_TENANT} per tenant across instances`, async () => {
    const tenant = await createTenant(a, admin, 'sse-crowd');
    const keys = await Promise.all(
      Array.from({ length: MAX_STREAMS_PER_TENANT / MAX_STREAMS_PER_CREDENTIAL }, async (_, n) => (await createKey(a, tenant.key, { label: `crowd-${n}`, type_permissions: { '*': 'read' } })).key),
    );
    const crowd = await Promise.all(keys.flatMap((key, n) => Array.from({ length: MAX_STREAMS_PER_CREDENTIAL }, () => open(n % 2 ? b : a, key))));
    expect(crowd.filter((s) => s.status === 200)).toHaveLength(MAX_STREAMS_PER_TENANT);
    const res = await refused(b, tenant.key);
    expect(res.status).toBe(429);
    expect(res.body.error).toMatchObject({ code: 'rate_limited', details: { limit: MAX_STREAMS_PER_TENANT, scope: 'tenant' } });
    // Another tenant is not held back.
    const elsewhere = await open(a, admin);
    expect(elsewhere.status).toBe(200);
    elsewhere.close();
    crowd[0].close();
    await waitFor(async () => (await open(b, tenant.key)).status === 200, 'a stream in the freed slot');
    crowd.forEach((s) => s.close());
  });

  it('records one outbox event per change, naming the credential that caused it', async () => {
    const writer = await createKey(a, admin, { label: 'writer', type_permissions: { '*': 'write' } });
    const item = (await note('audited', writer.key)).body;
    const rows = await a.sql<{ name: string; credential_id: string }>(
      `SELECT name, credential_id FROM events WHERE payload->'item'->>'id' = $1 ORDER BY seq`,
      [item.id],
    );
    expect(rows).toEqual([{ name: 'item.created', credential_id: writer.id }]);
  });

  it('drops dispatched events past the retention period; resuming after one gets stream.reset', async () => {
    const old = (await note('expired')).body;
    const kept = (await note('retained')).body;
    const eventOf = async (itemId: string) =>
      (await a.sql<{ id: string }>(`SELECT id FROM events WHERE payload->'item'->>'id' = $1 AND dispatched_at IS NOT NULL`, [itemId]))[0]?.id;
    await waitFor(async () => Boolean((await eventOf(old.id)) && (await eventOf(kept.id))), 'both events dispatched');
    const expired = await eventOf(old.id);
    await a.sql(`UPDATE events SET created_at = now() - interval '8 days' WHERE id = $1`, [expired]);

    // Past the retention period, though still stored (the janitor has yet to pass): events after it may be gone, so no resuming from it.
    const early = await open(b, admin, '', { 'Last-Event-ID': expired });
    await waitFor(() => early.named().length > 0, 'the reset');
    expect(early.named()[0]).toMatchObject({ event: 'stream.reset', body: { reason: 'last_event_id_unknown' } });
    early.close();
    expect(await a.app.get(EventsJanitor).sweep()).toBeGreaterThanOrEqual(1);
    expect(await eventOf(old.id)).toBeUndefined();
    expect(await eventOf(kept.id)).toBeDefined();
    const s = await open(b, admin, '', { 'Last-Event-ID': expired });
    await waitFor(() => s.named().length > 0, 'the reset');
    expect(s.named()[0]).toMatchObject({ event: 'stream.reset', body: { reason: 'last_event_id_unknown' } });
  });
});

describe('GET /events while Redis is silent', () => {
  const at = appBehindProxy(['redis']);

  it('opens the stream, its slot counted by this instance, rather than waiting for Redis', async () => {
    const { t, redis } = at;
    const { key } = await bootstrapAdmin(t);
    await redisUp(t);
    redis.stall();
    const stream = await SseClient.open(`${t.url}/events`, bearer(key));
    try {
      // A bearer's answer is stored by no cache; nor transformed (compressed, buffered) on its way.
      expect([stream.status, stream.contentType, stream.cacheControl]).toEqual([200, 'text/event-stream; charset=utf-8', 'no-store, no-transform']);
    } finally {
      stream.close();
    }
  });
});
