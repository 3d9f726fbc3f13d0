/**
 * GET /search over real HTTP against real PostgreSQL: what is found (title, body, nested
 * strings, tags; never a `searchable: false` field), ranking (weights, recency), the query
 * language (phrase, or, exclusion, prefix, typo fallback), snippets (no markup from items),
 * filters and permissions, tenant isolation, validation and stable paging. Items are written
 * through POST /items, PATCH and POST /items/bulk, so the index is checked on every write path.
 * Each block works in its own tenant so result sets are exact.
 */
import { HEADLINE_SOURCE_CHARS } from '../src/search/snippet';
import { MAX_QUERY_WORDS } from '../src/search/search-query';
import { badFields } from './support/envelope';
import { bootstrapAdmin, createKey, createTenant, startApp, TestApp } from './support/app';
import { Api, api, createItem, expectError, expectStatus, note } from './items/helpers';

type Result = {
  item: Record<string, any>;
  metadata: { item_id: string; tags?: string[]; extensions: Record<string, unknown> };
  relevance_score: number;
  snippet_html: string;
  snippet: string;
};

async function search(c: Api, q: string | undefined, extra: Record<string, string | number> = {}): Promise<Result[]> {
  const res = await c.get('/search', { ...(q === undefined ? {} : { q }), ...extra });
  expectStatus(res, 200);
  return res.body.results;
}

const ids = (results: Result[]) => results.map((r) => r.item.id);
const daysAgo = (days: number) => new Date(Date.now() - days * 86_400_000).toISOString();

describe('search', () => {
  let t: TestApp;
  let rootKey: string;
  let seq = 0;

  async function freshTenant(): Promise<{ c: Api; key: string; tenantId: string }> {
    const { key, tenantId } = await createTenant(t, rootKey, `search-${seq++}`);
    return { c: api(t, key), key, tenantId };
  }

  beforeAll(async () => {
    t = await startApp();
    rootKey = (await bootstrapAdmin(t)).key;
  });
  afterAll(() => t?.close());

  describe('what is searched', () => {
    let c: Api;
    const made: Record<string, string> = {};

    beforeAll(async () => {
      ({ c } = await freshTenant());
      expectStatus(
        await c.post('/types', {
          name: 'acme.vault',
          schema: {
            properties: {
              title: { type: 'string' },
              secret: { type: 'string', searchable: false },
              meta: { type: 'object', properties: { pin: { type: 'string', searchable: false }, label: { type: 'string' } } },
            },
          },
        }),
        201,
      );
      made.title = (await createItem(c, note('Zephyr quartz almanac'))).id;
      made.body = (await createItem(c, { type: 'core.note', properties: { title: 't', body: 'spread some marmalade on toast' } })).id;
      made.nested = (await createItem(c, {
        type: 'core.note',
        properties: { title: 'n', details: { colours: [{ name: 'vermilion' }, 'ochre'] } },
      })).id;
      made.tag = (await createItem(c, note('tagged', { tags: ['xylophone'] }))).id;
      made.vault = (await createItem(c, {
        type: 'acme.vault',
        properties: { title: 'strongbox holder', secret: 'sesquipedalian', meta: { pin: 'obfuscatedpin', label: 'brasslabel' } },
      })).id;
    });

    it.each([
      ['a title word', 'zephyr', 'title'],
      ['a body word', 'marmalade', 'body'],
      ['a string nested in objects and arrays', 'vermilion', 'nested'],
      ['another nested string', 'ochre', 'nested'],
      ['a tag', 'xylophone', 'tag'],
      ['a searchable nested field of a type with unsearchable ones', 'brasslabel', 'vault'],
    ])('finds %s', async (_what, q, name) => {
      expect(ids(await search(c, q))).toEqual([made[name]]);
    });

    it('returns the SPEC 2.3 entry shape', async () => {
      const [r] = await search(c, 'xylophone');
      expect(Object.keys(r).sort()).toEqual(['item', 'metadata', 'relevance_score', 'snippet', 'snippet_html']);
      expect(r.item).toMatchObject({ id: made.tag, type: 'core.note', properties: { title: 'tagged' }, tags: ['xylophone'] });
      expect(r.metadata).toEqual({ item_id: made.tag, tags: ['xylophone'], extensions: {} });
      expect(typeof r.relevance_score).toBe('number');
      expect(r.relevance_score).toBeGreaterThan(0);
      expect(r.snippet).toContain('xylophone');
      expect(r.snippet_html).toContain('<mark>xylophone</mark>');
    });

    it('never finds a field whose schema says searchable: false, at any depth, nor shows it in snippets', async () => {
      for (const q of ['sesquipedalian', 'obfuscatedpin', 'sesqui', '"sesquipedalian"', 'sesquipedalian or obfuscatedpin']) {
        expect(ids(await search(c, q))).toEqual([]);
      }
      const [hit] = await search(c, 'strongbox');
      expect(hit.item.id).toBe(made.vault);
      expect(hit.snippet).not.toContain('sesquipedalian');
      expect(hit.snippet).not.toContain('obfuscatedpin');
    });

    it("keeps a parent's searchable: false in its subtypes, whatever they restate of the property", async () => {
      expectStatus(
        await c.post('/types', {
          name: 'acme.vaultlet',
          parent: 'acme.vault',
          schema: { properties: { secret: { searchable: true, maxLength: 100 }, meta: { type: 'object', properties: { label: { type: 'string' } } } } },
        }),
        201,
      );
      const item = await createItem(c, {
        type: 'acme.vaultlet',
        properties: { title: 'lockbox holder', secret: 'quinquagenarian', meta: { pin: 'cryptopinword', label: 'copperlabel' } },
      });
      expect(ids(await search(c, 'copperlabel'))).toEqual([item.id]);
      for (const q of ['quinquagenarian', 'cryptopinword']) expect(ids(await search(c, q))).toEqual([]);
    });

    it('follows PATCH: new words are found, replaced ones no longer', async () => {
      const item = await createItem(c, note('pangolin'));
      expect(ids(await search(c, 'pangolin'))).toEqual([item.id]);
      expectStatus(await c.patch(`/items/${item.id}`, { version: 1, properties: { title: 'armadillo' }, tags: ['burrow'] }), 200);
      expect(ids(await search(c, 'pangolin'))).toEqual([]);
      expect(ids(await search(c, 'armadillo'))).toEqual([item.id]);
      expect(ids(await search(c, 'burrow'))).toEqual([item.id]);
    });

    it('finds an item by its tags however long its description', async () => {
      const item = await createItem(c, note('tagged', { properties: { title: 'tagged', description: 'lorem '.repeat(5000) }, tags: ['okapi'] }));
      expect(ids(await search(c, 'okapi'))).toEqual([item.id]);
    });

    it('finds words inside <…>, and the parts of URLs, host names, e-mail addresses and file names', async () => {
      const item = await createItem(c, {
        type: 'core.note',
        properties: {
          title: 'generics',
          body: 'use List<pademelon> here, if a<bandicoot and quoll>d; see https://www.bilby.org/marsupials, write to numbat@tassie.example about report.pdf',
        },
      });
      for (const q of ['pademelon', 'bandicoot', 'quoll', 'bilby', 'marsupials', 'tassie', 'numbat', 'report', 'List<pademelon>', 'www.bilby.org', 'numbat@tassie.example']) {
        expect({ q, found: ids(await search(c, q)) }).toEqual({ q, found: [item.id] });
      }
      // A word that breaks apart is a phrase: its parts in that order.
      expect(ids(await search(c, 'org.bilby'))).toEqual([]);
      expect(ids(await search(c, 'generics -tassie.example'))).toEqual([]);
      const [hit] = await search(c, 'pademelon');
      expect(hit.snippet_html).toContain('List&lt;<mark>pademelon</mark>&gt; here');
      // The snippet is the text as written: no space put after a `<`.
      expect(hit.snippet).toContain('use List<pademelon> here, if a<bandicoot and quoll>d;');
    });

    it('follows a natural-key upsert', async () => {
      const first = await createItem(c, note('capybara', { source_id: 'ext-1' }));
      const res = await c.post('/items', note('tapir', { source_id: 'ext-1' }));
      expectStatus(res, 200);
      expect(ids(await search(c, 'capybara'))).toEqual([]);
      expect(ids(await search(c, 'tapir'))).toEqual([first.id]);
    });
  });

  describe('query language and ranking', () => {
    let c: Api;
    const made: Record<string, string> = {};
    const ts = daysAgo(3);

    beforeAll(async () => {
      ({ c } = await freshTenant());
      const mk = async (name: string, properties: Record<string, unknown>, extra: Record<string, unknown> = {}) =>
        (made[name] = (await createItem(c, { type: 'core.note', properties, timestamp: ts, ...extra })).id);
      await mk('inTitle', { title: 'pelican report', body: 'nothing here' });
      await mk('inBody', { title: 'a report', body: 'we saw a pelican by the sea' });
      await mk('redApple', { title: 'fruit: red apple with green leaves' });
      await mk('greenApple', { title: 'fruit: green apple with a red ribbon' });
      await mk('kumquat', { title: 'kumquat basket fruit' });
      await mk('durian', { title: 'durian basket fruit' });
      await mk('hello', { title: 'Hello world' });
      await mk('kangaroo', { title: 'marsupial', body: 'kangaroo jumping' });
    });

    it('ranks a title match above a body match', async () => {
      const results = await search(c, 'pelican');
      expect(ids(results)).toEqual([made.inTitle, made.inBody]);
      expect(results[0].relevance_score).toBeGreaterThan(results[1].relevance_score);
    });

    it('matches quoted phrases in order (and a phrase gets no fuzzy fallback)', async () => {
      expect(ids(await search(c, '"red apple"'))).toEqual([made.redApple]);
      expect(ids(await search(c, '"apple red"'))).toEqual([]);
      expect(ids(await search(c, '"apple with a red"'))).toEqual([made.greenApple]);
    });

    it('widens only the last word to a prefix, not the same word inside a phrase', async () => {
      const widened = await createItem(c, { type: 'core.note', properties: { title: 'wombat burrowing and barking' }, timestamp: ts });
      const exact = await createItem(c, { type: 'core.note', properties: { title: 'wombat burrow here and burrowing' }, timestamp: ts });
      expect(ids(await search(c, '"wombat burrow" burrow'))).toEqual([exact.id]);
      expect(new Set(ids(await search(c, 'wombat burrow')))).toEqual(new Set([widened.id, exact.id]));
    });

    it('matches phrases of common words exactly (common grams), on every write path', async () => {
      const hamlet = (await createItem(c, { type: 'core.note', properties: { title: 'whether to be or not to be' }, timestamp: ts })).id;
      // Every word of the phrases below, never in their order (title end and body start are adjacent).
      const shuffled = (await createItem(c, { type: 'core.note', properties: { title: 'be to not or', body: 'see' }, timestamp: ts })).id;
      expect(ids(await search(c, '"to be or not to be"'))).toEqual([hamlet]);
      expect(ids(await search(c, '"not to"'))).toEqual([hamlet]);
      expect(ids(await search(c, '"be to"'))).toEqual([shuffled]);
      expect(ids(await search(c, '"whether to be"'))).toEqual([hamlet]);
      // A common word beside a rarer one has no gram (the vector index narrows it, the exact
      // test settles it); the same words in another order are no match.
      expect(ids(await search(c, '"whether to"'))).toEqual([hamlet]);
      expect(ids(await search(c, '"to whether"'))).toEqual([]);
      // A stop word beside a frequent word ('first', 'time') is a gram too.
      const first = (await createItem(c, { type: 'core.note', properties: { title: 'the first of its kind' }, timestamp: ts })).id;
      const apart = (await createItem(c, { type: 'core.note', properties: { title: 'of all kinds, the first' }, timestamp: ts })).id;
      expect(ids(await search(c, '"first of"'))).toEqual([first]);
      expect(ids(await search(c, '"of the first"'))).toEqual([]);
      expect(ids(await search(c, '"the first"')).sort()).toEqual([first, apart].sort());
      expect(ids(await search(c, '"to be" or "be to"')).sort()).toEqual([hamlet, shuffled].sort());
      expect(ids(await search(c, 'whether -"be to"'))).toEqual([hamlet]);
      expectStatus(await c.patch(`/items/${shuffled}`, { version: 1, properties: { title: 'to be seen' } }), 200);
      expect(ids(await search(c, '"to be"')).sort()).toEqual([hamlet, shuffled].sort());
      expect(ids(await search(c, '"be to"'))).toEqual([]);
    });

    it('supports or', async () => {
      expect(ids(await search(c, 'kumquat or durian')).sort()).toEqual([made.kumquat, made.durian].sort());
    });

    it('supports -exclusion of words and phrases', async () => {
      expect(ids(await search(c, 'basket -durian'))).toEqual([made.kumquat]);
      expect(ids(await search(c, 'fruit -"red apple" -basket'))).toEqual([made.greenApple]);
      // Under `or`, an excluded phrase matches every item without it: all but the red apple.
      const either = ids(await search(c, 'kumquat or -"red apple"', { limit: '100' }));
      expect(either).toEqual(expect.arrayContaining(Object.values(made).filter((id) => id !== made.redApple)));
      expect(either).not.toContain(made.redApple);
    });

    it('matches the last word as a prefix', async () => {
      expect(ids(await search(c, 'hel'))).toEqual([made.hello]);
      expect(ids(await search(c, 'world hel'))).toEqual([made.hello]);
      expect(ids(await search(c, 'kumquat or duri')).sort()).toEqual([made.kumquat, made.durian].sort());
      expect(ids(await search(c, 'kumq or durian'))).toEqual([made.durian]);
      // Only the last word: "kang jumping" needs the whole word "kang" (a body word, so the
      // title-only typo fallback cannot step in).
      expect(ids(await search(c, 'jumping kang'))).toEqual([made.kangaroo]);
      expect(ids(await search(c, 'kang jumping'))).toEqual([]);
      // Not inside quotes, nor after a minus (which then excludes only the whole word).
      expect(ids(await search(c, '"hello wor"'))).toEqual([]);
      expect(ids(await search(c, 'basket -dur')).sort()).toEqual([made.kumquat, made.durian].sort());
    });

    it('highlights prefix matches', async () => {
      const [r] = await search(c, 'hel');
      expect(r.snippet_html).toContain('<mark>Hello</mark>');
    });

    it('falls back to similar titles when nothing matches (typos)', async () => {
      const results = await search(c, 'helo wrold');
      expect(ids(results)[0]).toBe(made.hello);
      expect(results[0].relevance_score).toBeGreaterThan(0);
      expect(ids(await search(c, 'pelicna'))).toContain(made.inTitle);
      // The fallback honours exclusions too.
      expect(ids(await search(c, 'helo -world'))).not.toContain(made.hello);
      // The answer says which it is: matches, or similar words for a "did you mean".
      expect((await c.get('/search', { q: 'helo wrold' })).body.match).toBe('similar');
      expect((await c.get('/search', { q: 'hello' })).body.match).toBe('text');
      expect((await c.get('/search', { q: '"helo wrold"' })).body).toEqual({ results: [], match: 'text' });
    });

    it('a query that matches nothing, even loosely, returns no results', async () => {
      expect((await c.get('/search', { q: 'qqqzzzxxx' })).body).toEqual({ results: [], match: 'text' });
    });
  });

  describe('snippets', () => {
    let c: Api;

    beforeAll(async () => {
      ({ c } = await freshTenant());
      await createItem(c, {
        type: 'core.note',
        properties: {
          title: '<script>alert(1)</script> hello',
          body: 'hello <img src=x onerror=alert(1)> & "quotes" \'single\' <b>bold</b> \uE000fake\uE001 mark',
        },
        tags: ['<i>tag</i>'],
      });
    });

    it('carry no markup from item content, only <mark> around matches', async () => {
      for (const q of ['hello', 'alert', 'img', 'fake', 'mark', 'bold']) {
        const [r] = await search(c, q);
        expect(r).toBeDefined();
        expect(r.snippet_html).not.toMatch(/<script/i);
        expect(r.snippet_html.replace(/<\/?mark>/g, '')).not.toMatch(/[<>]/);
        const tags = r.snippet_html.match(/<[^>]*>/g) ?? [];
        for (const tag of tags) expect(['<mark>', '</mark>']).toContain(tag);
        expect(r.snippet).not.toMatch(/[\uE000-\uE002]/);
        expect(r.snippet_html).not.toMatch(/[\uE000-\uE002]/);
      }
      const [r] = await search(c, 'hello');
      expect(r.snippet_html).toContain('<mark>hello</mark>');
      expect(r.snippet).toContain('hello');
      expect(r.snippet).not.toContain('<mark>');
    });

    it('highlight the words of any query, however its phrase repeats them, at the cost of the words alone', async () => {
      // A phrase of one word repeated, over text that repeats it: what ts_headline was given as
      // the query itself, its cost grew past any bound (100 words exhausted the server's memory).
      await createItem(c, { type: 'core.note', properties: { title: "O'Brien's back\\slash", body: 'zz '.repeat(400) } });
      const [r] = await search(c, `"${'zz '.repeat(MAX_QUERY_WORDS).trim()}"`);
      expect(r.snippet_html).toContain('<mark>zz</mark> <mark>zz</mark>');
      const [quoted] = await search(c, `o'brien's back\\slash zz`);
      expect(quoted.snippet_html).toContain('<mark>Brien</mark>&#39;<mark>s</mark> <mark>back</mark>\\<mark>slash</mark>');
    });

    it('are cut from the first HEADLINE_SOURCE_CHARS characters of a long text, which is still searched whole', async () => {
      const filler = 'lorem ipsum dolor sit amet '.repeat(Math.ceil(HEADLINE_SOURCE_CHARS / 27));
      await createItem(c, { type: 'core.note', properties: { title: 'Long read', body: `quokka early. ${filler} wombat late.` } });
      const [early] = await search(c, 'quokka');
      expect(early.snippet_html).toContain('<mark>quokka</mark>');
      const [late] = await search(c, 'wombat');
      expect(late.item.properties.title).toBe('Long read');
      expect(late.snippet).toMatch(/^Long read/);
      expect(late.snippet_html).not.toContain('<mark>');
    });
  });

  describe('filters and permissions', () => {
    let c: Api;
    let key: string;
    const made: Record<string, string> = {};

    beforeAll(async () => {
      ({ c, key } = await freshTenant());
      const other = await createKey(t, key, { label: 'feeder', role: 'admin', source: 'feeder', default_tier: 'feed' });
      const feeder = api(t, other.key);
      made.note = (await createItem(c, note('gazebo note', { tags: ['garden', 'wood'], tier: 'library' }))).id;
      made.bookmark = (await createItem(c, {
        type: 'core.bookmark',
        properties: { url: 'https://example.com', title: 'gazebo bookmark' },
        tags: ['garden'],
        tier: 'library',
      })).id;
      made.feed = (await createItem(feeder, note('gazebo from the feed', { tags: ['wood'] }))).id;
      made.archived = (await createItem(c, note('gazebo archived'))).id;
      expectStatus(await c.patch(`/items/${made.archived}`, { version: 1, state: 'archived' }), 200);
      made.trashed = (await createItem(c, note('gazebo trashed'))).id;
      expectStatus(await c.delete(`/items/${made.trashed}`), 200);
    });

    const expectSet = async (query: Record<string, string>, names: string[]) => {
      expect(ids(await search(c, 'gazebo', query)).sort()).toEqual(names.map((n) => made[n]).sort());
    };

    it('default: active items of every type and tier', () => expectSet({}, ['note', 'bookmark', 'feed']));
    it('type', () => expectSet({ type: 'core.bookmark' }, ['bookmark']));
    it('type pattern', () => expectSet({ type: 'core.*' }, ['note', 'bookmark', 'feed']));
    it('tags (AND)', () => expectSet({ tags: 'garden,wood' }, ['note']));
    it('tags (one)', () => expectSet({ tags: 'wood' }, ['note', 'feed']));
    it('state', () => expectSet({ state: 'archived' }, ['archived']));
    it('state trashed', () => expectSet({ state: 'trashed' }, ['trashed']));
    it('state all', () => expectSet({ state: 'all' }, ['note', 'bookmark', 'feed', 'archived', 'trashed']));
    it('tier', () => expectSet({ tier: 'feed' }, ['feed']));
    it('source', () => expectSet({ source: 'feeder' }, ['feed']));
    it('tier and type together', () => expectSet({ tier: 'library', type: 'core.note' }, ['note']));

    it('edge and backref clauses', async () => {
      expectStatus(await c.post('/edge-types', { name: 'acme.links', source_types: ['*'], target_types: ['*'] }), 201);
      expectStatus(await c.post('/edges', { type: 'acme.links', source_id: made.note, target_id: made.bookmark }), 201);
      expect(ids(await search(c, 'gazebo', { edge: `acme.links:${made.bookmark}` }))).toEqual([made.note]);
      expect(ids(await search(c, 'gazebo', { backref: `acme.links:${made.note}` }))).toEqual([made.bookmark]);
      expect(ids(await search(c, 'gazebo', { edge: `*:${made.note}` }))).toEqual([]);
      // Results carry their outgoing edges, as GET /items/:id renders them.
      const [hit] = await search(c, 'gazebo', { edge: `acme.links:${made.bookmark}` });
      expect(hit.item.edges).toEqual({ 'acme.links': [made.bookmark] });
      expect(hit.item.edges).toEqual((await c.get(`/items/${made.note}`)).body.edges);
      // Also on the typo fallback's page.
      const fallback = (await search(c, 'gazebbo')).find((r) => r.item.id === made.note);
      expect(fallback?.item.edges).toEqual({ 'acme.links': [made.bookmark] });
    });

    it('rejects a bad filter like GET /items does', async () => {
      expectError(await c.get('/search', { q: 'gazebo', state: 'gone' }), 400, 'validation_error');
      expectError(await c.get('/search', { q: 'gazebo', type: 'Not A Pattern' }), 400, 'validation_error');
      // Each edge clause costs a subquery: at most 10 of each kind.
      const clauses = (n: number) => Array.from({ length: n }, () => `acme.links:${made.bookmark}`);
      expectStatus(await c.get('/items', { edge: clauses(10) as never }), 200);
      expectError(await c.get('/items', { edge: clauses(11) as never }), 400, 'validation_error');
      expectError(await c.get('/search', { q: 'gazebo', backref: clauses(11) as never }), 400, 'validation_error');
      expectError(await c.get('/search', { q: 'gazebo', bogus: '1' }), 400, 'validation_error');
    });

    it('a member never gets items of a type it may not read', async () => {
      const member = await createKey(t, key, { label: 'notes only', role: 'member', type_permissions: { 'core.note': 'read' } });
      const m = api(t, member.key);
      expect(ids(await search(m, 'gazebo')).sort()).toEqual([made.note, made.feed].sort());
      expect(ids(await search(m, 'gazebo', { type: 'core.bookmark' }))).toEqual([]);
      // Edges to what it may not read are left out, as on GET /items/:id.
      const hit = (await search(m, 'gazebo')).find((r) => r.item.id === made.note);
      expect(hit?.item.edges).toEqual((await m.get(`/items/${made.note}`)).body.edges);
      // Not when the text matches only it (the fallback then offers the readable look-alikes),
      // nor through the typo fallback.
      expect(ids(await search(m, 'gazebo bookmark'))).not.toContain(made.bookmark);
      expect(ids(await search(m, 'gazebbo bookmarc'))).not.toContain(made.bookmark);
    });

    it('another tenant sees none of these items, and this one none of its', async () => {
      const other = await freshTenant();
      const mine = await createItem(other.c, note('gazebo elsewhere'));
      expect(ids(await search(other.c, 'gazebo'))).toEqual([mine.id]);
      expect(ids(await search(other.c, 'gazebbo'))).toEqual([mine.id]);
      expect(ids(await search(c, 'elsewhere'))).toEqual([]);
    });

    it('needs a bearer token', async () => {
      expectError(await t.http.get('/search').query({ q: 'gazebo' }), 401, 'unauthorized');
    });
  });

  describe('validation', () => {
    let c: Api;
    beforeAll(async () => {
      ({ c } = await freshTenant());
    });

    it.each([
      ['missing q', {}],
      ['empty q', { q: '' }],
      ['blank q', { q: '   ' }],
      ['limit 0', { q: 'x', limit: 0 }],
      ['limit 101', { q: 'x', limit: 101 }],
      ['limit not a number', { q: 'x', limit: 'ten' }],
      ['offset -1', { q: 'x', offset: -1 }],
      ['offset 10001', { q: 'x', offset: 10001 }],
    ])('%s → 400 validation_error', async (_what, query) => {
      expectError(await c.get('/search', query as Record<string, string | number>), 400, 'validation_error');
    });

    it('says a missing q is required, and refuses an empty source, a repeated or gapped tags list and a malformed edge clause as GET /items does', async () => {
      const fields = async (query: string) => expectError(await c.get(`/search?${query}`), 400, 'validation_error').details!.fields;
      expect(await fields('limit=5')).toEqual([{ field: 'q', message: 'is required' }]);
      expect(await fields('q=x&source=')).toEqual([{ field: 'source', message: 'must be longer than or equal to 1 characters' }]);
      expect(await fields('q=x&tags=a&tags=b')).toEqual([{ field: 'tags', message: 'give tags once, as one comma-separated list' }]);
      for (const tags of ['a,,b', 'a,', '']) {
        expect([tags, await fields(`q=x&tags=${tags}`)]).toEqual([tags, [{ field: 'tags', message: 'give tags as a comma-separated list without empty entries ("a,b", not "a,,b", "a," or "")' }]]);
      }
      for (const clause of ['edge=acme.links_to', 'edge=acme.links_to:not-an-id', 'backref=acme.links_to', 'backref=acme.links_to:not-an-id']) {
        expect([clause, await fields(`q=x&${clause}`)]).toEqual([clause, [{ field: clause.split('=')[0], message: 'must look like <edge type>:<item id>' }]]);
      }
    });

    it('accepts the bounds', async () => {
      for (const query of [{ limit: 1 }, { limit: 100 }, { offset: 0 }, { offset: 10000 }] as Array<Record<string, number>>) {
        expectStatus(await c.get('/search', { q: 'x', ...query }), 200);
      }
      expectStatus(await c.get('/search', { q: `"${'word '.repeat(16).trim()}" ${'-other '.repeat(15)} last` }), 200);
    });

    it(`refuses more than ${MAX_QUERY_WORDS} words, phrases' and excluded ones counted and words split by punctuation, in q and in a bulk filter alike`, async () => {
      const commas = Array.from({ length: MAX_QUERY_WORDS + 1 }, () => 'w').join(',');
      for (const q of [`"${'word '.repeat(MAX_QUERY_WORDS + 1)}"`, `${'-other '.repeat(MAX_QUERY_WORDS)} last`, 'www.a.b.c.d.e.f.g '.repeat(5), commas]) {
        expect(badFields(await c.get('/search', { q }))).toEqual(['q']);
        expect(badFields(await c.post('/items/bulk_action', { action: 'update_tier', tier: 'feed', dry_run: true, filter: { filter: q } }))).toEqual(['filter.filter']);
      }
    });

    it('survives query syntax that is not words', async () => {
      for (const q of ['"', '-', 'or', '!!!', '"unclosed phrase', ':* & | !', "it's", '\\', '-"x" or']) {
        expectStatus(await c.get('/search', { q }), 200);
      }
    });
  });

  describe('paging', () => {
    let c: Api;
    let all: string[];

    beforeAll(async () => {
      ({ c } = await freshTenant());
      const timestamp = daysAgo(1);
      const res = await c.post('/items/bulk', {
        mode: 'create_only',
        items: Array.from({ length: 25 }, (_, n) => note(`identical walrus ${n % 2 ? 'odd' : 'even'}`, { timestamp })),
      });
      expectStatus(res, 200);
      all = res.body.results.map((r: { id: string }) => r.id);
    });

    it('limit/offset pages of equal scores neither overlap nor skip, and repeat exactly', async () => {
      const pages = [];
      for (const offset of [0, 10, 20]) pages.push(ids(await search(c, 'walrus', { limit: 10, offset })));
      expect(pages.map((p) => p.length)).toEqual([10, 10, 5]);
      const seen = pages.flat();
      expect(new Set(seen).size).toBe(25);
      expect([...seen].sort()).toEqual([...all].sort());
      expect(ids(await search(c, 'walrus', { limit: 10, offset: 10 }))).toEqual(pages[1]);
      const scores = (await search(c, 'walrus', { limit: 100 })).map((r) => r.relevance_score);
      expect(scores).toEqual([...scores].sort((a, b) => b - a));
    });

    it('a page past the end is empty, not a typo fallback', async () => {
      expect(await search(c, 'walrus', { offset: 30 })).toEqual([]);
    });
  });

  describe('recency', () => {
    it('with equal text, the item with the newer timestamp ranks first', async () => {
      const { c } = await freshTenant();
      // Created newest-first, so creation order cannot explain the result.
      const fresh = await createItem(c, note('narwhal sighting', { timestamp: daysAgo(1) }));
      const old = await createItem(c, note('narwhal sighting', { timestamp: daysAgo(400) }));
      const middle = await createItem(c, note('narwhal sighting', { timestamp: daysAgo(45) }));
      const results = await search(c, 'narwhal');
      expect(ids(results)).toEqual([fresh.id, middle.id, old.id]);
      expect(results[0].relevance_score).toBeGreaterThan(results[1].relevance_score);
      expect(results[1].relevance_score).toBeGreaterThan(results[2].relevance_score);
    });

    it('copes with extreme timestamps', async () => {
      const { c } = await freshTenant();
      const ancient = await createItem(c, note('sundial', { timestamp: '1000-01-01T00:00:00.000Z' }));
      const future = await createItem(c, note('sundial', { timestamp: '9999-12-31T00:00:00.000Z' }));
      const results = await search(c, 'sundial');
      expect(ids(results)).toEqual([future.id, ancient.id]);
      expect(results.every((r) => Number.isFinite(r.relevance_score) && r.relevance_score > 0)).toBe(true);
    });

    it('a much better match still beats a newer weak one', async () => {
      const { c } = await freshTenant();
      const strong = await createItem(c, note('okapi okapi okapi', { timestamp: daysAgo(365) }));
      const weak = await createItem(c, { type: 'core.note', properties: { title: 'misc', body: 'one okapi' }, timestamp: daysAgo(0) });
      expect(ids(await search(c, 'okapi'))).toEqual([strong.id, weak.id]);
    });

    it('SEARCH_RECENCY_HALF_LIFE_DAYS=0 turns it off', async () => {
      const t0 = await startApp({ SEARCH_RECENCY_HALF_LIFE_DAYS: '0' });
      try {
        const c0 = api(t0, (await bootstrapAdmin(t0)).key);
        const fresh = await createItem(c0, note('narwhal sighting', { timestamp: daysAgo(1) }));
        const old = await createItem(c0, note('narwhal sighting', { timestamp: daysAgo(400) }));
        const results = await search(c0, 'narwhal');
        expect(results).toHaveLength(2);
        expect(results[0].relevance_score).toBe(results[1].relevance_score);
        // Equal scores fall back to id order.
        expect(ids(results)).toEqual([fresh.id, old.id].sort());
      } finally {
        await t0.close();
      }
    });
  });

  it('is in the OpenAPI document with its parameters', async () => {
    const doc = (await t.http.get('/openapi.json').expect(200)).body;
    const op = doc.paths['/search']?.get;
    expect(op).toBeDefined();
    const names = op.parameters.map((p: { name: string }) => p.name);
    expect(names).toEqual(expect.arrayContaining(['q', 'limit', 'offset', 'type', 'state', 'tier', 'tags', 'source']));
    expect(op.responses['200']).toBeDefined();
  });
});
