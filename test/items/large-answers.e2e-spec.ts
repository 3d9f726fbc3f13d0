/**
 * Large JSON answers (pages of big items, search pages, one big item) leave as a Buffer built
 * element by element (src/common/json-reply.ts): their bytes must be exactly those of
 * JSON.stringify, for items with edges, tags, readable and unreadable extension namespaces and
 * non-ASCII text, with a Content-Length that counts those bytes.
 */
import type { Response } from 'supertest';
import { BUFFERED_FROM_CHARS } from '../../src/common/json-reply';
import { bearer, bootstrapAdmin, createKey, startApp, TestApp } from '../support/app';
import { Api, api, createItem, expectStatus } from './helpers';

const EXTENSIONS = { 'acme.public': { p: 1, note: 'visible' }, 'other.secret': { s: 'hidden' } };
const WORDS = ['alpha', 'river', 'café', 'naïve', '…', '日本語', '🙂', 'stone', '"quoted"', 'line\nbreak', 'tab\there'];
const body = (n: number) => Array.from({ length: 2_000 }, (_, i) => WORDS[(i * 7 + n) % WORDS.length]).join(' ');

describe('items: large answers', () => {
  let t: TestApp;
  let admin: Api;
  let adminKey: string;
  let memberKey: string;
  const made: string[] = [];

  /** GET `path` as `key`, the body as the bytes that arrived (uncompressed: compression.e2e-spec.ts has those). */
  const raw = (key: string, path: string, query: Record<string, string | number> = {}): Promise<Response> =>
    t.http
      .get(path)
      .query(query)
      .set(bearer(key))
      .set('Accept-Encoding', 'identity')
      .buffer(true)
      .parse((res, done) => {
        const chunks: Buffer[] = [];
        res.on('data', (chunk: Buffer) => chunks.push(chunk));
        res.on('end', () => done(null, Buffer.concat(chunks)));
      });

  /** The answer's bytes are JSON.stringify's of the value they denote; returns that value. */
  function jsonOf(res: Response): any {
    expectStatus(res, 200);
    const bytes = res.body as Buffer;
    const value = JSON.parse(bytes.toString('utf8'));
    expect(bytes.equals(Buffer.from(JSON.stringify(value)))).toBe(true);
    expect([res.headers['content-type'], Number(res.headers['content-length'])]).toEqual(['application/json; charset=utf-8', bytes.length]);
    return value;
  }

  beforeAll(async () => {
    t = await startApp();
    adminKey = (await bootstrapAdmin(t)).key;
    admin = api(t, adminKey);
    expectStatus(await admin.post('/edge-types', { name: 'acme.links', source_types: ['*'], target_types: ['*'] }), 201);
    for (let n = 0; n < 12; n++) {
      const edges = made.length ? { 'acme.links': made.slice(-2) } : undefined;
      const item = await createItem(admin, {
        type: 'core.note', properties: { title: `big ${n} é`, body: body(n), n }, tags: ['big', `n${n}`], extensions: EXTENSIONS,
        ...(edges ? { edges } : {}),
      });
      made.unshift(item.id);
    }
    memberKey = (await createKey(t, adminKey, { role: 'member', type_permissions: { 'core.note': 'read' }, extension_permissions: { 'acme.*': 'read' } })).key;
  });
  afterAll(() => t?.close());

  it('a page of big items is JSON.stringify of the page, as the admin and as a member without every namespace', async () => {
    const page = jsonOf(await raw(adminKey, '/items', { limit: 100, type: 'core.note' }));
    expect(JSON.stringify(page).length).toBeGreaterThan(BUFFERED_FROM_CHARS);
    expect(page.items.map((i: any) => i.id)).toEqual(made);
    expect(page.items[0]).toMatchObject({ extensions: EXTENSIONS, tags: ['big', 'n11'], edges: { 'acme.links': expect.any(Array) } });
    expect(page.items[0].properties.body).toBe(body(11));

    const seen = jsonOf(await raw(memberKey, '/items', { limit: 100, type: 'core.note' }));
    expect(seen.items.map((i: any) => i.id)).toEqual(made);
    expect(seen.items.every((i: any) => JSON.stringify(i.extensions) === JSON.stringify({ 'acme.public': EXTENSIONS['acme.public'] }))).toBe(true);
    // A cut page and its cursor too.
    const first = jsonOf(await raw(adminKey, '/items', { limit: 7, type: 'core.note' }));
    const rest = jsonOf(await raw(adminKey, '/items', { limit: 7, type: 'core.note', cursor: first.next_cursor }));
    expect([...first.items, ...rest.items].map((i: any) => i.id)).toEqual(made);
  });

  it('one big item, its versions and a search page are JSON.stringify of themselves', async () => {
    const item = jsonOf(await raw(memberKey, `/items/${made[0]}`));
    expect([item.id, item.properties.body, item.extensions]).toEqual([made[0], body(11), { 'acme.public': EXTENSIONS['acme.public'] }]);
    jsonOf(await raw(adminKey, `/items/${made[0]}/versions`));
    const found = jsonOf(await raw(adminKey, '/search', { q: 'river stone', limit: 100 }));
    expect(found.results.map((r: any) => r.item.id).sort()).toEqual([...made].sort());
    expect(JSON.stringify(found).length).toBeGreaterThan(BUFFERED_FROM_CHARS);
  });
});
