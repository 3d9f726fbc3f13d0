/**
 * `GET /events/history`: the kept events as JSON pages, in publication order, filtered like a
 * stream (names, types, the credential's permissions); cursors to follow and to poll again
 * with; `after` an event id; a page's bound on events read; validation; tenant isolation.
 */
import { bearer, bootstrapAdmin, createKey, createTenant, startApp, TestApp } from './support/app';
import { badFields, expectError } from './support/envelope';
import { waitFor } from './support/wait';
import { randomUUID } from 'node:crypto';
import { encodeCursor } from '../src/common/pagination';
import { HISTORY_SCAN_EVENTS } from '../src/events/event-history';

interface Page {
  events: Array<{ id: string; event: string; created_at: string; data: any }>;
  next_cursor: string;
  has_more: boolean;
}

describe('event history (e2e)', () => {
  let t: TestApp;
  let root: string;
  let admin: string;
  let tenantId: string;

  const history = async (key: string, query = ''): Promise<Page> => {
    const res = await t.http.get(`/events/history${query}`).set(bearer(key));
    if (res.status !== 200) throw new Error(`history: ${res.status} ${res.text}`);
    return res.body;
  };
  /** Every page from `query` on, following next_cursor while has_more: the events and the last cursor. */
  const all = async (key: string, query: string): Promise<{ events: Page['events']; cursor: string }> => {
    const events: Page['events'] = [];
    let page = await history(key, query);
    events.push(...page.events);
    while (page.has_more) {
      page = await history(key, `?cursor=${page.next_cursor}&limit=100`);
      events.push(...page.events);
    }
    return { events, cursor: page.next_cursor };
  };
  /** The tenant's events in publication order, once all `n` are published. */
  const published = (n: number) =>
    waitFor(async () => {
      const rows: Array<{ id: string; name: string }> = await t.sql(
        `SELECT id, name FROM events WHERE tenant_id = $1 AND published_seq IS NOT NULL ORDER BY published_seq`,
        [tenantId],
      );
      return rows.length >= n && rows;
    }, `${n} events published`);
  const write = (type: string, title: string, key = admin) =>
    t.http.post('/items').set(bearer(key)).send({ type, properties: { title } }).expect(201).then((r) => r.body);

  beforeAll(async () => {
    t = await startApp();
    root = (await bootstrapAdmin(t)).key;
    ({ key: admin, tenantId } = await createTenant(t, root, 'history'));
  });
  afterAll(() => t?.close());

  it('needs a credential and valid parameters', async () => {
    expectError(await t.http.get('/events/history'), 401, 'unauthorized');
    const bad = async (query: string) => badFields(await t.http.get(`/events/history${query}`).set(bearer(admin)));
    expect(await bad('?events=item.exploded')).toEqual(['events']);
    expect(await bad('?type_filter=Bad!')).toEqual(['type_filter']);
    expect(await bad('?limit=0')).toEqual(['limit']);
    expect(await bad('?limit=101')).toEqual(['limit']);
    expect(await bad('?cursor=nonsense')).toEqual(['cursor']);
    // A cursor another list issued is not one of these.
    expect(await bad(`?cursor=${encodeCursor({ createdAt: new Date().toISOString(), id: randomUUID() }, 'items')}`)).toEqual(['cursor']);
    expect(await bad('?after=00000000-0000-4000-8000-000000000000')).toEqual(['after']);
    expect(await bad('?after=not-an-id')).toEqual(['after']);
  });

  it('lists the events oldest first in publication order, as a stream gets them, page by page, then polls for what came since', async () => {
    const empty = await history(admin);
    expect([empty.events, empty.has_more]).toEqual([[], false]);
    const made = [];
    for (let n = 0; n < 5; n++) made.push(await write('core.note', `h${n}`));
    const rows = await published(5);

    const { events, cursor } = await all(admin, '?limit=2');
    expect(events.map((e) => e.id)).toEqual(rows.map((r) => r.id));
    expect(events.map((e) => [e.event, e.data.event, e.data.item.id])).toEqual(made.map((i) => ['item.created', 'item.created', i.id]));
    expect(events.every((e) => !Number.isNaN(Date.parse(e.created_at)))).toBe(true);
    expect(events[0].data.item).toEqual(made[0]);

    // Nothing new: the same place, nothing more.
    const idle = await history(admin, `?cursor=${cursor}`);
    expect([idle.events, idle.has_more, idle.next_cursor]).toEqual([[], false, cursor]);
    const later = await write('core.note', 'later');
    await published(6);
    const since = await history(admin, `?cursor=${cursor}`);
    expect(since.events.map((e) => e.data.item.id)).toEqual([later.id]);

    // After an event id (as Last-Event-ID): what follows it.
    const after = await history(admin, `?after=${rows[2].id}`);
    expect(after.events.map((e) => e.id)).toEqual([...rows.slice(3).map((r) => r.id), since.events[0].id]);
    expect(badFields(await t.http.get(`/events/history?after=${rows[2].id}&cursor=${cursor}`).set(bearer(admin)))).toEqual(['after']);
  });

  it('filters by event names, types and what the credential may read; another tenant sees none of it', async () => {
    const task = await write('core.task', 'a task');
    const patched = await t.http.patch(`/items/${task.id}`).set(bearer(admin)).send({ version: 1, properties: { title: 'done' } }).expect(200);
    // Published in the order written: the update listed, the task's creation is too.
    await waitFor(async () => (await all(admin, '?events=item.updated')).events.length === 1 || undefined, 'the update listed');

    const updates = (await all(admin, '?events=item.updated')).events;
    expect(updates.map((e) => [e.event, e.data.item.version])).toEqual([['item.updated', patched.body.version]]);
    const tasks = (await all(admin, '?type_filter=core.task')).events;
    expect(tasks.map((e) => e.event)).toEqual(['item.created', 'item.updated']);

    const member = (await createKey(t, admin, { role: 'member', type_permissions: { 'core.task': 'read' } })).key;
    const seen = (await all(member, '')).events;
    expect(seen.map((e) => e.data.item.type)).toEqual(['core.task', 'core.task']);

    const other = await createTenant(t, root, 'history-other');
    expect((await all(other.key, '')).events).toEqual([]);
  });

  it(`reads at most ${HISTORY_SCAN_EVENTS} events a page: one that finds too few of the caller's ends with a cursor from there`, async () => {
    const { key, tenantId: busy } = await createTenant(t, root, 'history-busy');
    const member = (await createKey(t, key, { role: 'member', type_permissions: { 'core.task': 'read' } })).key;
    const notes = Array.from({ length: HISTORY_SCAN_EVENTS }, (_, i) => ({ type: 'core.note', properties: { title: `n${i}` } }));
    await t.http.post('/items/bulk').set(bearer(key)).send({ mode: 'create_only', items: notes }).expect(200);
    const task = await write('core.task', 'the one', key);
    await waitFor(async () => {
      const [{ n }] = await t.sql(`SELECT count(*)::int AS n FROM events WHERE tenant_id = $1 AND published_seq IS NOT NULL`, [busy]);
      return n === HISTORY_SCAN_EVENTS + 1 || undefined;
    }, 'all events published', 60_000);

    const first = await history(member, '?limit=10');
    expect([first.events, first.has_more]).toEqual([[], true]);
    const rest = await all(member, `?cursor=${first.next_cursor}&limit=10`);
    expect(rest.events.map((e) => e.data.item.id)).toEqual([task.id]);
  }, 120_000);
});
