/**
 * GET /items: filters (type pattern, state, tier, tags, source, since/until), limit bounds
 * and cursor pagination. Each block works in its own tenant so counts are exact.
 */
import { bootstrapAdmin, createTenant, startApp, TestApp } from '../support/app';
import { PAGE_BYTES } from '../../src/common/pagination';
import { Api, api, createItem, expectError, expectStatus, note } from './helpers';

const ids = (res: { body: { items: Array<{ id: string }> } }) => res.body.items.map((i) => i.id);

describe('items: listing', () => {
  let t: TestApp;
  let rootKey: string;
  let tenantSeq = 0;

  /** A fresh tenant's admin API. */
  async function freshTenant(): Promise<{ c: Api; key: string }> {
    const { key } = await createTenant(t, rootKey, `list-${tenantSeq++}`);
    return { c: api(t, key), key };
  }

  beforeAll(async () => {
    t = await startApp();
    rootKey = (await bootstrapAdmin(t)).key;
  });
  afterAll(() => t?.close());

  it('pages 50 items at a time when no limit is given', async () => {
    const { c } = await freshTenant();
    const items = Array.from({ length: 51 }, (_, i) => ({ type: 'core.note', properties: { title: `n${i}` } }));
    expectStatus(await c.post('/items/bulk', { mode: 'create_only', items }), 200);
    const first = await c.get('/items');
    expect([first.body.items.length, typeof first.body.next_cursor]).toEqual([50, 'string']);
    const rest = await c.get('/items', { cursor: first.body.next_cursor });
    expect([rest.body.items.length, rest.body.next_cursor]).toEqual([1, null]);
  });

  it(`stops a page once it holds ${PAGE_BYTES / 1024 / 1024} MB of items, short of its limit, with a cursor to the rest; versions alike`, async () => {
    const { c } = await freshTenant();
    // Ten items of 0.95 MB: nine fit before the mark (each page holds the item that crosses it).
    const big = (n: number) => ({ title: `big ${n}`, body: `${n} `.padEnd(950_000, 'x') });
    const made: string[] = [];
    for (let n = 0; n < 10; n++) made.unshift((await createItem(c, { type: 'core.note', properties: big(n), tags: ['big'] })).id);
    const first = await c.get('/items', { tags: 'big', limit: 100 });
    expectStatus(first, 200);
    expect(ids(first)).toEqual(made.slice(0, 9));
    expect(first.body.next_cursor).toEqual(expect.any(String));
    const rest = await c.get('/items', { tags: 'big', limit: 100, cursor: first.body.next_cursor });
    expect([ids(rest), rest.body.next_cursor]).toEqual([made.slice(9), null]);

    const id = made[0];
    for (let version = 1; version < 10; version++) expectStatus(await c.patch(`/items/${id}`, { version, properties: big(100 + version) }), 200);
    const versions = await c.get(`/items/${id}/versions`, { limit: 100 });
    expect(versions.body.versions.map((v: { version: number }) => v.version)).toEqual([10, 9, 8, 7, 6, 5, 4, 3, 2]);
    const older = await c.get(`/items/${id}/versions`, { limit: 100, before: versions.body.next_before });
    expect([older.body.versions.map((v: { version: number }) => v.version), older.body.next_before]).toEqual([[1], null]);
  });

  it('an empty tenant lists nothing', async () => {
    const { c } = await freshTenant();
    const res = await c.get('/items');
    expectStatus(res, 200);
    expect(res.body).toEqual({ items: [], next_cursor: null });
  });

  describe('filters', () => {
    let c: Api;
    const made: Record<string, string> = {};

    beforeAll(async () => {
      const tenant = await freshTenant();
      c = tenant.c;
      await c.post('/types', { name: 'acme.recipe', schema: { properties: { title: { type: 'string' } } } });
      await c.post('/types', { name: 'acme.recipe.quick', parent: 'acme.recipe', schema: {} });
      await c.post('/types', { name: 'acme.recipes', schema: {} }); // shares a prefix, not a parent
      const mk = async (name: string, body: Record<string, unknown>) => (made[name] = (await createItem(c, body)).id);
      await mk('note2020', note('n', { timestamp: '2020-06-01T00:00:00.000Z', tags: ['a'], tier: 'library' }));
      await mk('note2021', note('n', { timestamp: '2021-06-01T00:00:00.000Z', tags: ['a', 'b'], tier: 'feed' }));
      await mk('note2022', note('n', { timestamp: '2022-06-01T00:00:00.000Z', tags: ['b'], tier: 'library' }));
      await mk('bookmark', { type: 'core.bookmark', properties: { url: 'https://example.com' }, timestamp: '2023-01-01T00:00:00.000Z', tags: ['a', 'b', 'c'], tier: 'feed' });
      await mk('recipe', { type: 'acme.recipe', properties: { title: 'r' }, timestamp: '2023-02-01T00:00:00.000Z' });
      await mk('quick', { type: 'acme.recipe.quick', properties: { title: 'q' }, timestamp: '2023-03-01T00:00:00.000Z' });
      await mk('recipes', { type: 'acme.recipes', properties: {}, timestamp: '2023-04-01T00:00:00.000Z' });
      await mk('archived', note('arch', { state: 'archived', timestamp: '2023-05-01T00:00:00.000Z' }));
      await mk('trashed', note('trash', { timestamp: '2023-06-01T00:00:00.000Z' }));
      await c.delete(`/items/${made.trashed}`);
      const rev = await createItem(c, note('rev', { timestamp: '2023-07-01T00:00:00.000Z' }));
      made.revoked = rev.id;
      expectStatus(await c.patch(`/items/${rev.id}`, { version: 1, state: 'revoked' }), 200);
    });

    const expectIds = async (query: Record<string, string | number>, names: string[]) => {
      const res = await c.get('/items', query);
      expectStatus(res, 200);
      expect(ids(res).sort()).toEqual(names.map((n) => made[n]).sort());
    };

    const ACTIVE = ['note2020', 'note2021', 'note2022', 'bookmark', 'recipe', 'quick', 'recipes'];

    it('default: active items of every type and tier, newest first', async () => {
      const res = await c.get('/items');
      expect(ids(res).sort()).toEqual(ACTIVE.map((n) => made[n]).sort());
      const created = res.body.items.map((i: any) => i.created_at);
      expect([...created].sort().reverse()).toEqual(created);
      expect(res.body.next_cursor).toBeNull();
    });

    it('type: exact name, parent.* (the type and its subtypes), core.*, and *', async () => {
      await expectIds({ type: 'core.note' }, ['note2020', 'note2021', 'note2022']);
      await expectIds({ type: 'acme.recipe' }, ['recipe']);
      await expectIds({ type: 'acme.recipe.*' }, ['recipe', 'quick']);
      await expectIds({ type: 'acme.*' }, ['recipe', 'quick', 'recipes']);
      await expectIds({ type: 'core.*' }, ['note2020', 'note2021', 'note2022', 'bookmark']);
      await expectIds({ type: '*' }, ACTIVE);
      await expectIds({ type: 'core.nothing' }, []);
    });

    it('a malformed type pattern → 400 validation_error', async () => {
      expectError(await c.get('/items', { type: 'Not A Type' }), 400, 'validation_error');
      expectError(await c.get('/items', { type: 'core.*.x' }), 400, 'validation_error');
    });

    it('state: trashed, archived and revoked items appear only when asked for', async () => {
      await expectIds({ state: 'trashed' }, ['trashed']);
      await expectIds({ state: 'archived' }, ['archived']);
      await expectIds({ state: 'revoked' }, ['revoked']);
      await expectIds({ state: 'active', type: 'core.note' }, ['note2020', 'note2021', 'note2022']);
      await expectIds({ state: 'all', type: 'core.note' }, ['note2020', 'note2021', 'note2022', 'archived', 'trashed', 'revoked']);
      expectError(await c.get('/items', { state: 'deleted' }), 400, 'validation_error');
    });

    it('tier: library, feed, all', async () => {
      await expectIds({ tier: 'feed' }, ['note2021', 'bookmark']);
      await expectIds({ tier: 'library' }, ['note2020', 'note2022', 'recipe', 'quick', 'recipes']);
      await expectIds({ tier: 'all' }, ACTIVE);
      expectError(await c.get('/items', { tier: 'gold' }), 400, 'validation_error');
    });

    it('tags: a comma list means all of them (AND)', async () => {
      await expectIds({ tags: 'a' }, ['note2020', 'note2021', 'bookmark']);
      await expectIds({ tags: 'a,b' }, ['note2021', 'bookmark']);
      await expectIds({ tags: 'a, b ,c' }, ['bookmark']);
      await expectIds({ tags: 'a,zzz' }, []);
    });

    it('source: items written by one key', async () => {
      const source = (await c.get('/items')).body.items[0].source;
      await expectIds({ source }, ACTIVE);
      await expectIds({ source, state: 'trashed' }, ['trashed']);
      await expectIds({ source: 'nobody.wrote.this' }, []);
    });

    it('source_id: the item of a natural key, the caller\'s own source unless another is named; in search and bulk filters alike', async () => {
      const { c } = await freshTenant();
      const other = api(t, (await c.post('/keys', { label: 'sync', type_permissions: { '*': 'write' } })).body.key);
      const mine = (await createItem(c, note('mine', { source_id: 'ext-1' }))).id;
      const theirs = (await createItem(other, note('theirs', { source_id: 'ext-1' }))).id;
      const theirSource = (await other.get(`/items/${theirs}`)).body.source;
      expect(ids(await c.get('/items', { source_id: 'ext-1' }))).toEqual([mine]);
      expect(ids(await other.get('/items', { source_id: 'ext-1' }))).toEqual([theirs]);
      expect(ids(await c.get('/items', { source_id: 'ext-1', source: theirSource }))).toEqual([theirs]);
      expect(ids(await c.get('/items', { source_id: 'ext-2' }))).toEqual([]);
      expect((await c.get('/search', { q: 'theirs', source_id: 'ext-1', source: theirSource })).body.results.map((r: { item: { id: string } }) => r.item.id)).toEqual([theirs]);
      expect((await c.get('/search', { q: 'theirs', source_id: 'ext-1' })).body.results).toEqual([]);
      const dry = await c.post('/items/bulk_action', { action: 'update_tier', tier: 'feed', dry_run: true, filter: { source_id: 'ext-1' } });
      expect([dry.status, dry.body.matched, dry.body.ids]).toEqual([200, 1, [mine]]);
      expect(expectError(await c.get('/items', { source_id: '' }), 400, 'validation_error').details!.fields).toEqual([{ field: 'source_id', message: expect.any(String) }]);
      expect(expectError(await c.get('/items', { source_id: 'x'.repeat(501) }), 400, 'validation_error').details!.fields).toEqual([{ field: 'source_id', message: expect.any(String) }]);
    });

    it('since (inclusive) and until (exclusive) filter on timestamp', async () => {
      await expectIds({ type: 'core.note', since: '2021-06-01T00:00:00.000Z' }, ['note2021', 'note2022']);
      await expectIds({ type: 'core.note', until: '2021-06-01T00:00:00.000Z' }, ['note2020']);
      await expectIds({ type: 'core.note', since: '2021-01-01T00:00:00Z', until: '2022-01-01T00:00:00Z' }, ['note2021']);
      await expectIds({ since: '2023-02-15T00:00:00+01:00' }, ['quick', 'recipes']);
      expectError(await c.get('/items', { since: 'last week' }), 400, 'validation_error');
      expectError(await c.get('/items', { until: '2021-13-01' }), 400, 'validation_error');
    });

    it('filters combine', async () => {
      await expectIds({ type: 'core.*', tags: 'b', tier: 'library' }, ['note2022']);
      await expectIds({ type: 'core.note', state: 'all', since: '2023-01-01T00:00:00Z' }, ['archived', 'trashed', 'revoked']);
    });

    it('limit must be 1..100 → otherwise 400 validation_error', async () => {
      for (const limit of [0, 101, -1, 'ten', 1.5]) {
        expectError(await c.get('/items', { limit }), 400, 'validation_error');
      }
      const one = await c.get('/items', { limit: 1 });
      expectStatus(one, 200);
      expect(one.body.items).toHaveLength(1);
      expect(typeof one.body.next_cursor).toBe('string');
      expectStatus(await c.get('/items', { limit: 100 }), 200);
    });

    it('refuses an empty source, a repeated or gapped tags list and a malformed edge clause, each in one wording', async () => {
      const fields = async (query: string) => expectError(await c.get(`/items?${query}`), 400, 'validation_error').details!.fields;
      expect(await fields('source=')).toEqual([{ field: 'source', message: 'must be longer than or equal to 1 characters' }]);
      expect(await fields('tags=a&tags=b')).toEqual([{ field: 'tags', message: 'give tags once, as one comma-separated list' }]);
      // Any single-valued parameter given twice is refused as such, beside the query's other bad fields.
      expect(await fields('type=core.note&type=core.bookmark')).toEqual([{ field: 'type', message: 'give type once' }]);
      expect(await fields('limit=1&limit=2&state=bogus')).toEqual([
        { field: 'limit', message: 'give limit once' },
        { field: 'state', message: expect.any(String) },
      ]);
      expect(await fields('colour=red&colour=blue')).toEqual([{ field: 'colour', message: 'is not a known field' }]);
      // edge and backref are repeatable, on /search (whose query is derived from this one) too.
      const twice = (name: string) => `${name}=acme.links_to:${made.recipe}&${name}=acme.links_to:${made.note2021}`;
      for (const path of ['/items?', '/search?q=x&']) {
        for (const name of ['edge', 'backref']) expectStatus(await c.get(`${path}${twice(name)}`), 200);
      }
      // An empty entry is refused, as GET /events refuses one in events and type_filter, rather than dropped.
      for (const tags of ['a,,b', 'a,', ',a', '', '%20', 'a,%20,b']) {
        expect([tags, await fields(`tags=${tags}`)]).toEqual([tags, [{ field: 'tags', message: 'give tags as a comma-separated list without empty entries ("a,b", not "a,,b", "a," or "")' }]]);
      }
      for (const name of ['edge', 'backref']) {
        for (const clause of ['acme.links_to', 'acme.links_to:not-an-id', `:${made.recipe}`, '', `acme.links_to:${made.recipe}&${name}=x`]) {
          expect([name, clause, await fields(`${name}=${clause}`)]).toEqual([name, clause, [{ field: name, message: 'must look like <edge type>:<item id>' }]]);
        }
      }
      await expectIds({ tags: ' a , b ' }, ['note2021', 'bookmark']);
    });

    it('an unknown query parameter → 400 validation_error', async () => {
      expectError(await c.get('/items', { colour: 'red' }), 400, 'validation_error');
    });
  });

  describe('cursor pagination', () => {
    it('pages of 10 over 25 items: 10, 10, 5, newest first, no overlap, nothing skipped', async () => {
      const { c } = await freshTenant();
      // Created concurrently so several share a created_at millisecond: ties must still page stably.
      const created = await Promise.all(Array.from({ length: 25 }, (_, i) => createItem(c, note(`p${i}`))));
      const all = new Set(created.map((i) => i.id));

      const pages: string[][] = [];
      let cursor: string | null | undefined;
      do {
        const res = await c.get('/items', { limit: 10, ...(cursor ? { cursor } : {}) });
        expectStatus(res, 200);
        pages.push(ids(res));
        cursor = res.body.next_cursor;
        // a new item during paging is newer than the cursor: it never shows up on later pages
        if (pages.length === 1) await createItem(c, note('late'));
      } while (cursor);

      expect(pages.map((p) => p.length)).toEqual([10, 10, 5]);
      const seen = pages.flat();
      expect(new Set(seen).size).toBe(seen.length);
      expect(new Set(seen)).toEqual(all);

      const full = await c.get('/items', { limit: 100 });
      const order = ids(full).filter((id) => all.has(id));
      expect(seen).toEqual(order);
    });

    it('the cursor keeps the filters and the last page has next_cursor null', async () => {
      const { c } = await freshTenant();
      for (let i = 0; i < 7; i++) await createItem(c, note(`f${i}`, { tags: i % 2 ? ['odd'] : ['even'] }));
      const p1 = await c.get('/items', { tags: 'even', limit: 3 });
      expect(p1.body.items).toHaveLength(3);
      const p2 = await c.get('/items', { tags: 'even', limit: 3, cursor: p1.body.next_cursor });
      expectStatus(p2, 200);
      expect(p2.body.items).toHaveLength(1);
      expect(p2.body.next_cursor).toBeNull();
      expect(p2.body.items.every((i: any) => i.tags.includes('even'))).toBe(true);

      const exact = await c.get('/items', { tags: 'even', limit: 4 });
      expect(exact.body.items).toHaveLength(4);
      expect(exact.body.next_cursor).toBeNull();
    });

    it('a cursor the service did not issue → 400 validation_error', async () => {
      const { c } = await freshTenant();
      await createItem(c, note('x'));
      const forged = (v: unknown) => Buffer.from(JSON.stringify(v)).toString('base64url');
      for (const cursor of [
        'garbage!!',
        'bm90IGpzb24',
        forged({ a: 1 }),
        forged(['not a date', '00000000-0000-0000-0000-000000000000']),
        forged(['2024-01-01T00:00:00.000Z', 'not-a-uuid']),
        forged([20240101, '00000000-0000-0000-0000-000000000000']),
        forged(['2024', '00000000-0000-0000-0000-000000000000']),
        forged(['+275760-09-13T00:00:00.000Z', '00000000-0000-0000-0000-000000000000']),
      ]) {
        const res = await c.get('/items', { cursor });
        expect({ cursor, status: res.status, code: res.body.error?.code }).toEqual({ cursor, status: 400, code: 'validation_error' });
      }
    });
  });
});
