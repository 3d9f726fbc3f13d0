/**
 * Bulk actions end to end (`POST /items/bulk_action` and its jobs): request validation naming
 * each field, who may do what (purge is admin-only, a member's match set is narrowed to the
 * types it may write), the selection (the same filter as `GET /items`, plus free text), the cap,
 * dry runs, direct runs (200 result) and jobs (202, polled to their end), the filter tested
 * again as each item is locked (an item that no longer matches is left alone), every action's
 * per-item rules (the lifecycle table, the types' schemas), versions and revisions, events with
 * and without `emit_events`, purge (edges, history, blob references), job visibility and
 * listing, cancellation of a queued job (on an instance that runs no jobs) and of a running one,
 * and the credential checked before each chunk (runs held by a row lock taken from the test).
 */
import { Client } from 'pg';
import type { Response } from 'supertest';
import { bearer, bootstrapAdmin, createKey, createTenant, startApp, TestApp } from './support/app';
import { badFields, expectError } from './support/envelope';
import { LIFECYCLE_TABLE, State } from './support/lifecycle-table';
import { PostgresQueryRunner } from 'typeorm/driver/postgres/PostgresQueryRunner';
import { BulkJanitor } from '../src/bulk/bulk-janitor';
import { EVENTS_PER_STATEMENT } from '../src/events/outbox';
import { SseClient } from './support/sse';
import { waitFor } from './support/wait';

const RFC3339 = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?Z$/;
const CHUNK = 500;

type Body = Record<string, unknown>;

/** Asserts a status; the failure shows the whole body. */
function expectStatus(res: Response, status: number): void {
  if (res.status !== status) expect({ status: res.status, body: res.body }).toEqual({ status, body: '(see above)' });
}

const sorted = (ids: string[]) => [...ids].sort();

describe('bulk actions (e2e)', () => {
  let t: TestApp;
  let admin: string;
  let adminId: string;
  /** Member: write on core.note, read on core.task. */
  let member: { key: string; id: string; source: string };
  /** Another member with the same permissions. */
  let member2: { key: string; id: string };
  let other: string; // admin of a second tenant
  let tagSeq = 0;

  const post = (key: string, path: string, body: unknown) => t.http.post(path).set(bearer(key)).send(body as object);
  const get = (key: string, path: string) => t.http.get(path).set(bearer(key));
  const del = (key: string, path: string) => t.http.delete(path).set(bearer(key));
  const bulk = (body: Body, key = admin) => post(key, '/items/bulk_action', body);
  const job = (id: string, key = admin) => get(key, `/items/bulk_action/jobs/${id}`);

  /** A tag no other test uses: each test selects its own items with it. */
  const freshTag = (name: string) => `${name}-${++tagSeq}`;

  /** Creates items through POST /items/bulk (1000 a call); returns their ids in request order. */
  async function seed(bodies: Body[], key = admin, app: TestApp = t): Promise<string[]> {
    const ids: string[] = [];
    for (let at = 0; at < bodies.length; at += 1000) {
      const res = await app.http.post('/items/bulk').set(bearer(key)).send({ mode: 'upsert', items: bodies.slice(at, at + 1000) });
      expectStatus(res, 200);
      for (const r of res.body.results) {
        if (r.status !== 'created') throw new Error(`seeding failed: ${JSON.stringify(r)}`);
        ids.push(r.id);
      }
    }
    return ids;
  }

  const notes = (n: number, tag: string, extra: Body = {}): Body[] =>
    Array.from({ length: n }, (_, i) => ({ type: 'core.note', properties: { title: `note ${i}` }, tags: [tag], ...extra }));

  async function createOne(body: Body, key = admin): Promise<Record<string, any>> {
    const res = await post(key, '/items', body);
    expectStatus(res, 201);
    return res.body;
  }

  /** An item in `state`, tagged `tag`. */
  async function itemIn(state: State, tag: string, type = 'core.note'): Promise<string> {
    const properties = type === 'core.bookmark' ? { url: 'https://example.com/x' } : { title: `in ${state}` };
    const item = await createOne({ type, properties, tags: [tag], ...(state === 'archived' ? { state } : {}) });
    if (state === 'trashed') expectStatus(await del(admin, `/items/${item.id}`), 200);
    if (state === 'revoked') expectStatus(await t.http.patch(`/items/${item.id}`).set(bearer(admin)).send({ version: 1, state: 'revoked' }), 200);
    return item.id;
  }

  /** id → version, straight from the database (absent: the row is gone). */
  async function versions(ids: string[], app: TestApp = t): Promise<Map<string, number>> {
    const rows = await app.sql<{ id: string; version: number }>(`SELECT id, version FROM items WHERE id = ANY($1::uuid[])`, [ids]);
    return new Map(rows.map((r) => [r.id, r.version]));
  }

  async function expectVersions(ids: string[], version: number): Promise<void> {
    const v = await versions(ids);
    expect(ids.filter((id) => v.get(id) !== version)).toEqual([]);
  }

  /** Event name → count, for events about these items. */
  async function itemEvents(ids: string[]): Promise<Record<string, number>> {
    const rows = await t.sql<{ name: string; n: number }>(
      `SELECT name, count(*)::int AS n FROM events WHERE payload->'item'->>'id' = ANY($1::text[]) GROUP BY name`,
      [ids],
    );
    return Object.fromEntries(rows.map((r) => [r.name, r.n]));
  }

  async function jobEvents(jobId: string, app: TestApp = t): Promise<string[]> {
    const rows = await app.sql<{ name: string }>(`SELECT name FROM events WHERE payload->'job'->>'id' = $1 ORDER BY seq`, [jobId]);
    return rows.map((r) => r.name);
  }

  /** Polls a job until `done` says so; returns it. */
  async function waitForJob(id: string, done: (j: any) => boolean, what: string, key = admin, app: TestApp = t): Promise<any> {
    return waitFor(async () => {
      const res = await app.http.get(`/items/bulk_action/jobs/${id}`).set(bearer(key));
      expectStatus(res, 200);
      return done(res.body) && res.body;
    }, what);
  }

  const ended = (j: any) => ['completed', 'failed', 'cancelled'].includes(j.status);

  /** What the row of a job holds beside what the API answers. */
  async function storedJob(id: string, app: TestApp = t): Promise<{ spec: unknown; principal: unknown; item_ids: number } | undefined> {
    const [row] = await app.sql<{ spec: unknown; principal: unknown; item_ids: number }>(
      `SELECT spec, principal, cardinality(item_ids) AS item_ids FROM bulk_jobs WHERE id = $1`,
      [id],
    );
    return row;
  }

  async function itemById(id: string): Promise<Record<string, any>> {
    const res = await get(admin, `/items/${id}`);
    expectStatus(res, 200);
    return res.body;
  }

  /**
   * Holds a row lock on `id` while `during` runs, from a connection of the test's own.
   * `blocked` waits until another session (a bulk run) waits for that lock.
   */
  async function withRowLock<T>(
    id: string,
    during: (release: () => Promise<void>, blocked: () => Promise<unknown>) => Promise<T>,
    app: TestApp = t,
  ): Promise<T> {
    const lock = new Client({ connectionString: app.databaseUrl });
    await lock.connect();
    let released = false;
    const release = async () => {
      if (released) return;
      released = true;
      await lock.query('ROLLBACK');
    };
    const [{ pid }] = (await lock.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')).rows;
    const blocked = () =>
      waitFor(async () => {
        const rows = await app.sql(`SELECT 1 FROM pg_stat_activity WHERE $1::int = ANY(pg_blocking_pids(pid))`, [pid]);
        return rows.length > 0;
      }, 'a bulk run to wait for the locked row');
    try {
      await lock.query('BEGIN');
      await lock.query('SELECT 1 FROM items WHERE id = $1 FOR UPDATE', [id]);
      return await during(release, blocked);
    } finally {
      await release().catch(() => undefined);
      await lock.end();
    }
  }

  beforeAll(async () => {
    t = await startApp({ BLOB_STORAGE: 'postgres' });
    const root = await bootstrapAdmin(t);
    admin = root.key;
    adminId = root.id;
    const m = await createKey(t, admin, { label: 'bulk member', role: 'member', type_permissions: { 'core.note': 'write', 'core.task': 'read' } });
    member = { key: m.key, id: m.id, source: m.source };
    const m2 = await createKey(t, admin, { label: 'bulk member 2', role: 'member', type_permissions: { 'core.note': 'write', 'core.task': 'read' } });
    member2 = { key: m2.key, id: m2.id };
    other = (await createTenant(t, admin, 'bulk-other')).key;
  });
  afterAll(async () => {
    await t?.close();
  });

  describe('authentication and request validation', () => {
    it('needs a bearer on every route (401 unauthorized)', async () => {
      const unknown = '00000000-0000-4000-8000-000000000000';
      expectError(await t.http.post('/items/bulk_action').send({ action: 'update_tier', tier: 'feed', dry_run: true }), 401, 'unauthorized');
      expectError(await t.http.get('/items/bulk_action/jobs'), 401, 'unauthorized');
      expectError(await t.http.get(`/items/bulk_action/jobs/${unknown}`), 401, 'unauthorized');
      expectError(await t.http.delete(`/items/bulk_action/jobs/${unknown}`), 401, 'unauthorized');
      expectError(await bulk({ action: 'update_tier', tier: 'feed', dry_run: true }, 'svc_k1_not-a-real-key'), 401, 'unauthorized');
    });

    it('names each missing per-action field', async () => {
      expect(badFields(await bulk({ action: 'transition' }))).toEqual(['to_state']);
      expect(badFields(await bulk({ action: 'update_tier' }))).toEqual(['tier']);
      expect(badFields(await bulk({ action: 'update_properties' }))).toEqual(['properties']);
      expect(badFields(await bulk({ action: 'update_timestamp' }))).toEqual(['timestamp']);
      expect(sorted(badFields(await bulk({ action: 'update_tags' })))).toEqual(['add_tags', 'remove_tags']);
      // Empty lists change nothing, as update_properties' {} would not.
      expect(sorted(badFields(await bulk({ action: 'update_tags', add_tags: [], remove_tags: [] })))).toEqual(['add_tags', 'remove_tags']);
      expect(badFields(await bulk({ action: 'purge' }))).toEqual(['confirm']);
      // Even a dry run is checked whole.
      expect(badFields(await bulk({ action: 'transition', dry_run: true }))).toEqual(['to_state']);
    });

    it('refuses a tag list longer than 100 tags, of a whole body\'s worth, naming it, in the action and in its filter', async () => {
      const many = Array.from({ length: 100_000 }, (_, i) => `t${i}`);
      expect(badFields(await bulk({ action: 'update_tags', add_tags: many, remove_tags: ['x'] }))).toEqual(['add_tags']);
      expect(badFields(await bulk({ action: 'update_tags', add_tags: ['x'], filter: { tags: many }, dry_run: true }))).toEqual(['filter.tags']);
    });

    it('names fields that belong to another action, and every problem at once', async () => {
      expect(badFields(await bulk({ action: 'transition', to_state: 'archived', tier: 'feed' }))).toEqual(['tier']);
      expect(badFields(await bulk({ action: 'update_tier', tier: 'feed', to_state: 'archived' }))).toEqual(['to_state']);
      expect(badFields(await bulk({ action: 'update_tags', add_tags: ['x'], properties: { a: 1 } }))).toEqual(['properties']);
      expect(badFields(await bulk({ action: 'transition', to_state: 'archived', confirm: 'PURGE' }))).toEqual(['confirm']);
      expect(badFields(await bulk({ action: 'update_timestamp', timestamp: '2024-01-01T00:00:00Z', add_tags: ['x'] }))).toEqual(['add_tags']);
      expect(sorted(badFields(await bulk({ action: 'transition', tier: 'feed', timestamp: '2024-01-01T00:00:00Z' })))).toEqual([
        'tier',
        'timestamp',
        'to_state',
      ]);
    });

    it('validates values, nested filter fields and unknown fields, naming each', async () => {
      const cases: Array<[Body, string[]]> = [
        [{}, ['action']],
        [{ action: 'explode' }, ['action']],
        [{ action: 'transition', to_state: 'deleted' }, ['to_state']],
        [{ action: 'transition', to_state: null }, ['to_state']],
        [{ action: 'update_tier', tier: 'gold' }, ['tier']],
        [{ action: 'update_timestamp', timestamp: 'yesterday' }, ['timestamp']],
        [{ action: 'update_properties', properties: [] }, ['properties']],
        [{ action: 'update_properties', properties: 'x' }, ['properties']],
        [{ action: 'update_properties', properties: {} }, ['properties']],
        [{ action: 'update_tags', add_tags: 'x' }, ['add_tags']],
        [{ action: 'update_tags', remove_tags: [7] }, ['remove_tags']],
        [{ action: 'update_tier', tier: 'feed', dry_run: 'yes' }, ['dry_run']],
        [{ action: 'update_tier', tier: 'feed', async: 1 }, ['async']],
        [{ action: 'update_tier', tier: 'feed', emit_events: 'no' }, ['emit_events']],
        [{ action: 'update_tier', tier: 'feed', max_items: 0 }, ['max_items']],
        [{ action: 'update_tier', tier: 'feed', max_items: 1.5 }, ['max_items']],
        [{ action: 'update_tier', tier: 'feed', max_items: '10' }, ['max_items']],
        [{ action: 'purge', confirm: 7 }, ['confirm']],
        [{ action: 'update_tier', tier: 'feed', bogus: true }, ['bogus']],
        [{ action: 'update_tier', tier: 'feed', filter: 'core.note' }, ['filter']],
        [{ action: 'update_tier', tier: 'feed', filter: null }, ['filter']],
        [{ action: 'update_tier', tier: 'feed', filter: { type: 'Bad!' } }, ['filter.type']],
        [{ action: 'update_tier', tier: 'feed', filter: { foo: 1 } }, ['filter.foo']],
        [{ action: 'update_tier', tier: 'feed', filter: { state: 'gone' } }, ['filter.state']],
        [{ action: 'update_tier', tier: 'feed', filter: { tier: 'gold' } }, ['filter.tier']],
        [{ action: 'update_tier', tier: 'feed', filter: { since: 'last week' } }, ['filter.since']],
        [{ action: 'update_tier', tier: 'feed', filter: { until: 5 } }, ['filter.until']],
        [{ action: 'update_tier', tier: 'feed', filter: { tags: 'a' } }, ['filter.tags']],
        [{ action: 'update_tier', tier: 'feed', filter: { source: 3 } }, ['filter.source']],
        // Empty, they would match nothing (GET /items refuses `tags=` and `source=` alike).
        [{ action: 'update_tier', tier: 'feed', filter: { tags: [] } }, ['filter.tags']],
        [{ action: 'update_tier', tier: 'feed', filter: { source: '' } }, ['filter.source']],
        [{ action: 'update_tier', tier: 'feed', filter: { source: '' }, async: true }, ['filter.source']],
        [{ action: 'update_tier', tier: 'feed', filter: { source: 's'.repeat(501) } }, ['filter.source']],
        [{ action: 'update_tier', tier: 'feed', filter: { filter: '' } }, ['filter.filter']],
        [{ action: 'update_tier', tier: 'feed', filter: { filter: '  \t ' } }, ['filter.filter']],
      ];
      const failures: string[] = [];
      for (const [body, fields] of cases) {
        const res = await bulk(body);
        if (res.status !== 400 || res.body?.error?.code !== 'validation_error') {
          failures.push(`${JSON.stringify(body)} → ${res.status} ${res.text.slice(0, 200)}`);
          continue;
        }
        const got = sorted(badFields(res));
        if (JSON.stringify(got) !== JSON.stringify(sorted(fields))) failures.push(`${JSON.stringify(body)} → fields ${JSON.stringify(got)}`);
      }
      expect(failures).toEqual([]);
    });

    it('refuses properties that refer to a blob that does not exist, naming the property', async () => {
      const missing = `sha256:${'0'.repeat(64)}`;
      expect(badFields(await bulk({ action: 'update_properties', properties: { attachment: missing }, dry_run: true }))).toEqual([
        'properties.attachment',
      ]);
    });

    it('purge: a non-admin gets 403 forbidden (with or without confirm); an admin needs confirm: "PURGE"', async () => {
      const tag = freshTag('purge-guard');
      const ids = await seed(notes(2, tag), member.key);
      expectError(await bulk({ action: 'purge', filter: { tags: [tag] } }, member.key), 403, 'forbidden');
      expectError(await bulk({ action: 'purge', confirm: 'PURGE', filter: { tags: [tag] } }, member.key), 403, 'forbidden');
      expectError(await bulk({ action: 'purge', confirm: 'PURGE', dry_run: true, filter: { tags: [tag] } }, member.key), 403, 'forbidden');
      expect(badFields(await bulk({ action: 'purge', filter: { tags: [tag] } }))).toEqual(['confirm']);
      expect(badFields(await bulk({ action: 'purge', confirm: 'purge', filter: { tags: [tag] } }))).toEqual(['confirm']);
      expect(badFields(await bulk({ action: 'purge', confirm: 'yes', filter: { tags: [tag] } }))).toEqual(['confirm']);
      expect((await versions(ids)).size).toBe(2);
      await expectVersions(ids, 1);
    });

    it('writes nothing when a request is refused', async () => {
      const tag = freshTag('refused');
      const ids = await seed(notes(3, tag));
      const before = await t.sql<{ n: number }>(`SELECT count(*)::int AS n FROM item_versions`);
      const jobsBefore = await t.sql<{ n: number }>(`SELECT count(*)::int AS n FROM bulk_jobs`);
      badFields(await bulk({ action: 'update_tier', tier: 'feed', filter: { tags: [tag] }, bogus: 1 }));
      badFields(await bulk({ action: 'update_tier', tier: 'feed', to_state: 'archived', filter: { tags: [tag] } }));
      badFields(await bulk({ action: 'update_tier', tier: 'feed', async: true, filter: { tags: [tag], foo: 1 } }));
      expect(await t.sql(`SELECT count(*)::int AS n FROM item_versions`)).toEqual(before);
      expect(await t.sql(`SELECT count(*)::int AS n FROM bulk_jobs`)).toEqual(jobsBefore);
      await expectVersions(ids, 1);
    });
  });

  describe('the match set', () => {
    it('dry_run: 200 with the matched ids (oldest first) and count; writes nothing', async () => {
      const tag = freshTag('dry');
      const a = (await createOne({ type: 'core.note', properties: { title: 'a' }, tags: [tag] })).id;
      const b = (await createOne({ type: 'core.note', properties: { title: 'b' }, tags: [tag] })).id;
      const c = (await createOne({ type: 'core.note', properties: { title: 'c' }, tags: [tag] })).id;
      for (const body of [
        { action: 'transition', to_state: 'archived' },
        { action: 'update_tier', tier: 'feed' },
        { action: 'update_tags', add_tags: ['x'] },
        { action: 'update_properties', properties: { title: 'changed' } },
        { action: 'update_timestamp', timestamp: '2001-01-01T00:00:00Z' },
        { action: 'purge', confirm: 'PURGE' },
      ]) {
        const res = await bulk({ ...body, dry_run: true, filter: { tags: [tag] } });
        expectStatus(res, 200);
        expect(res.body).toEqual({ action: body.action, matched: 3, succeeded: 0, errored: 0, dry_run: true, ids: [a, b, c] });
      }
      // Even with async: a dry run is always answered at once.
      const res = await bulk({ action: 'update_tier', tier: 'feed', dry_run: true, async: true, filter: { tags: [tag] } });
      expectStatus(res, 200);
      expect(res.body).toMatchObject({ dry_run: true, matched: 3 });
      await expectVersions([a, b, c], 1);
      expect(await itemEvents([a, b, c])).toEqual({ 'item.created': 3 });
      const item = await itemById(a);
      expect(item).toMatchObject({ state: 'active', tier: 'library', tags: [tag], properties: { title: 'a' } });
    });

    it('an empty match set is fine: matched 0', async () => {
      const res = await bulk({ action: 'update_tier', tier: 'feed', filter: { tags: [freshTag('nothing')] } });
      expectStatus(res, 200);
      expect(res.body).toEqual({ action: 'update_tier', matched: 0, succeeded: 0, errored: 0, dry_run: false, ids: [], errors: [] });
    });

    it('selects by type name or pattern (parent.* with subtypes), tags (all of them), tier, source and state', async () => {
      const tag = freshTag('select');
      expectStatus(await post(admin, '/types', { name: 'acme.memo', parent: 'core.note', schema: { properties: { mood: { type: 'string' } } } }), 201);
      const note = (await createOne({ type: 'core.note', properties: { title: 'n' }, tags: [tag, 'red'] })).id;
      const memo = (await createOne({ type: 'acme.memo', properties: { title: 'm', mood: 'ok' }, tags: [tag] })).id;
      const task = (await createOne({ type: 'core.task', properties: { title: 't' }, tags: [tag, 'red'], tier: 'feed' })).id;
      const bookmark = (await createOne({ type: 'core.bookmark', properties: { url: 'https://example.com' }, tags: [tag], tier: 'feed' })).id;
      const mine = (await createOne({ type: 'core.note', properties: { title: 'member' }, tags: [tag] }, member.key)).id;
      const archived = (await createOne({ type: 'core.note', properties: { title: 'arch' }, tags: [tag], state: 'archived' })).id;
      const trashed = await itemIn('trashed', tag);

      const ids = async (filter: Body) => {
        const res = await bulk({ action: 'update_tier', tier: 'library', dry_run: true, filter: { tags: [tag], ...filter } });
        expectStatus(res, 200);
        expect(res.body.matched).toBe(res.body.ids.length);
        return sorted(res.body.ids);
      };
      const active = [note, memo, task, bookmark, mine];
      expect(await ids({})).toEqual(sorted(active));
      expect(await ids({ type: '*' })).toEqual(sorted(active));
      // As in GET /items: an exact name is exact; `parent.*` covers the type and its subtypes.
      expect(await ids({ type: 'core.note' })).toEqual(sorted([note, mine]));
      expect(await ids({ type: 'core.note.*' })).toEqual(sorted([note, memo, mine]));
      expect(await ids({ type: 'core.*' })).toEqual(sorted(active));
      expect(await ids({ type: 'acme.memo' })).toEqual([memo]);
      expect(await ids({ type: 'core.task' })).toEqual([task]);
      expect(await ids({ type: 'acme.*' })).toEqual([memo]);
      expect(await ids({ type: 'nosuch.type' })).toEqual([]);
      expect(await ids({ tags: [tag, 'red'] })).toEqual(sorted([note, task]));
      expect(await ids({ tier: 'feed' })).toEqual(sorted([task, bookmark]));
      expect(await ids({ tier: 'library' })).toEqual(sorted([note, memo, mine]));
      expect(await ids({ tier: 'all' })).toEqual(sorted(active));
      expect(await ids({ source: member.source })).toEqual([mine]);
      expect(await ids({ source: 's'.repeat(500) })).toEqual([]); // as long as GET /items takes
      expect(await ids({ state: 'archived' })).toEqual([archived]);
      expect(await ids({ state: 'trashed' })).toEqual([trashed]);
      expect(await ids({ state: 'all' })).toEqual(sorted([...active, archived, trashed]));
      // Without any filter: every active item of the tenant, ours among them.
      const everything = await bulk({ action: 'update_tier', tier: 'library', dry_run: true });
      expectStatus(everything, 200);
      expect(everything.body.ids).toEqual(expect.arrayContaining(active));
      expect(everything.body.ids).not.toContain(archived);
    });

    it('selects by timestamp: since inclusive, until exclusive', async () => {
      const tag = freshTag('time');
      const [y2020, y2021, y2022] = await seed(
        ['2020-01-01T00:00:00Z', '2021-01-01T00:00:00Z', '2022-01-01T00:00:00Z'].map((timestamp) => ({
          type: 'core.note',
          properties: { title: timestamp },
          tags: [tag],
          timestamp,
        })),
      );
      const ids = async (filter: Body) => sorted((await bulk({ action: 'update_tier', tier: 'feed', dry_run: true, filter: { tags: [tag], ...filter } })).body.ids);
      expect(await ids({ since: '2021-01-01T00:00:00Z' })).toEqual(sorted([y2021, y2022]));
      expect(await ids({ until: '2021-01-01T00:00:00Z' })).toEqual([y2020]);
      expect(await ids({ since: '2021-01-01T00:00:00Z', until: '2022-01-01T00:00:00Z' })).toEqual([y2021]);
      expect(await ids({ since: '2023-01-01T00:00:00Z' })).toEqual([]);
    });

    it('selects by free text with the semantics of search', async () => {
      const tag = freshTag('text');
      const [jam, jamOrange, plain] = await seed([
        { type: 'core.note', properties: { title: 'quince marmalade recipe' }, tags: [tag] },
        { type: 'core.note', properties: { title: 'orange marmalade', body: 'bitter' }, tags: [tag] },
        { type: 'core.note', properties: { title: 'shopping list' }, tags: [tag] },
      ]);
      const ids = async (text: string) =>
        sorted((await bulk({ action: 'update_tier', tier: 'feed', dry_run: true, filter: { tags: [tag], filter: text } })).body.ids);
      expect(await ids('marmalade')).toEqual(sorted([jam, jamOrange]));
      expect(await ids('bitter')).toEqual([jamOrange]);
      expect(await ids('marmalade -orange')).toEqual([jam]);
      expect(await ids('marmal')).toEqual(sorted([jam, jamOrange])); // prefix of the last word
      expect(await ids('shopping')).toEqual([plain]);
      expect(await ids('zyxwvutsrq')).toEqual([]);
    });

    it('narrows a member to the types it may write', async () => {
      const tag = freshTag('narrow');
      const [n1, n2, task, bookmark] = await seed([
        { type: 'core.note', properties: { title: 'n1' }, tags: [tag] },
        { type: 'core.note', properties: { title: 'n2' }, tags: [tag] },
        { type: 'core.task', properties: { title: 'task' }, tags: [tag] },
        { type: 'core.bookmark', properties: { url: 'https://example.com/b' }, tags: [tag] },
      ]);
      const dry = await bulk({ action: 'transition', to_state: 'archived', dry_run: true, filter: { type: '*', tags: [tag] } }, member.key);
      expectStatus(dry, 200);
      expect(sorted(dry.body.ids)).toEqual(sorted([n1, n2]));
      expect(dry.body.matched).toBe(2);
      // A type it may only read matches nothing.
      expect((await bulk({ action: 'transition', to_state: 'archived', dry_run: true, filter: { type: 'core.task', tags: [tag] } }, member.key)).body).toMatchObject({
        matched: 0,
        ids: [],
      });
      const run = await bulk({ action: 'transition', to_state: 'archived', filter: { tags: [tag] } }, member.key);
      expectStatus(run, 200);
      expect(run.body).toMatchObject({ matched: 2, succeeded: 2, errored: 0 });
      expect(sorted(run.body.ids)).toEqual(sorted([n1, n2]));
      expect((await itemById(task)).state).toBe('active');
      expect((await itemById(bookmark)).state).toBe('active');
      expect((await itemById(n1)).state).toBe('archived');
      // The admin sees all four.
      expect((await bulk({ action: 'update_tier', tier: 'feed', dry_run: true, filter: { state: 'all', tags: [tag] } })).body.matched).toBe(4);
    });

    it('never matches or touches another tenant\'s items', async () => {
      const tag = freshTag('tenant');
      const ours = await seed(notes(2, tag));
      const theirs = await seed(notes(3, tag), other);
      const dryOurs = await bulk({ action: 'update_tier', tier: 'feed', dry_run: true, filter: { tags: [tag] } });
      expect(sorted(dryOurs.body.ids)).toEqual(sorted(ours));
      const dryTheirs = await bulk({ action: 'update_tier', tier: 'feed', dry_run: true, filter: { tags: [tag] } }, other);
      expect(sorted(dryTheirs.body.ids)).toEqual(sorted(theirs));
      const run = await bulk({ action: 'update_tier', tier: 'feed', filter: { tags: [tag] } }, other);
      expectStatus(run, 200);
      expect(run.body).toMatchObject({ matched: 3, succeeded: 3 });
      await expectVersions(ours, 1);
      await expectVersions(theirs, 2);
      const purge = await bulk({ action: 'purge', confirm: 'PURGE', filter: { tags: [tag] } }, other);
      expectStatus(purge, 200);
      expect(purge.body.matched).toBe(3);
      expect((await versions(ours)).size).toBe(2);
      expect((await versions(theirs)).size).toBe(0);
    });

    it('max_items is 10,000 when not given', async () => {
      const { key, tenantId } = await createTenant(t, admin, 'ten-thousand');
      await t.sql(
        `INSERT INTO items (tenant_id, id, type, properties, state, source, "timestamp", tier, tags, created_at, updated_at)
         SELECT $1, gen_random_uuid(), 'core.note', '{"title":"n"}', 'active', 's', now(), 'library', '{many}', now(), now() FROM generate_series(1, 10001)`,
        [tenantId],
      );
      const send = (body: Body) => t.http.post('/items/bulk_action').set(bearer(key)).send(body);
      const capped = expectError(await send({ action: 'update_tier', tier: 'feed', dry_run: true, filter: { tags: ['many'] } }), 400, 'bulk_cap_exceeded');
      expect(capped.details).toEqual({ max_items: 10_000, ceiling: 50_000, matched: 10_001 });
      await t.sql(`DELETE FROM items WHERE tenant_id = $1 AND id = (SELECT id FROM items WHERE tenant_id = $1 LIMIT 1)`, [tenantId]);
      expect((await send({ action: 'update_tier', tier: 'feed', dry_run: true, filter: { tags: ['many'] } })).body.matched).toBe(10_000);
      // Past the ceiling, the count stops there.
      await t.sql(
        `INSERT INTO items (tenant_id, id, type, properties, state, source, "timestamp", tier, tags, created_at, updated_at)
         SELECT $1, gen_random_uuid(), 'core.note', '{"title":"n"}', 'active', 's', now(), 'library', '{many}', now(), now() FROM generate_series(1, 40001)`,
        [tenantId],
      );
      const past = expectError(await send({ action: 'update_tier', tier: 'feed', dry_run: true, filter: { tags: ['many'] } }), 400, 'bulk_cap_exceeded');
      expect(past.details).toEqual({ max_items: 10_000, ceiling: 50_000, more_than_ceiling: true });
    });

    it('400 bulk_cap_exceeded when the match set exceeds max_items (nothing written), or max_items exceeds 50000', async () => {
      const tag = freshTag('cap');
      const ids = await seed(notes(5, tag));
      const capped = expectError(await bulk({ action: 'update_tier', tier: 'feed', max_items: 4, filter: { tags: [tag] } }), 400, 'bulk_cap_exceeded');
      expect(capped.details).toEqual({ max_items: 4, ceiling: 50_000, matched: 5 });
      expectError(await bulk({ action: 'update_tier', tier: 'feed', max_items: 4, async: true, filter: { tags: [tag] } }), 400, 'bulk_cap_exceeded');
      expectError(await bulk({ action: 'update_tier', tier: 'feed', max_items: 4, dry_run: true, filter: { tags: [tag] } }), 400, 'bulk_cap_exceeded');
      expectError(await bulk({ action: 'purge', confirm: 'PURGE', max_items: 1, filter: { tags: [tag] } }), 400, 'bulk_cap_exceeded');
      await expectVersions(ids, 1);
      expectError(await bulk({ action: 'update_tier', tier: 'feed', max_items: 50_001, filter: { tags: [tag] } }), 400, 'bulk_cap_exceeded');
      expectError(await bulk({ action: 'update_tier', tier: 'feed', max_items: 50_001, dry_run: true, filter: { tags: [tag] } }), 400, 'bulk_cap_exceeded');
      await expectVersions(ids, 1);
      // Exactly max_items is allowed, and so is the ceiling itself.
      expect((await bulk({ action: 'update_tier', tier: 'feed', max_items: 5, dry_run: true, filter: { tags: [tag] } })).body.matched).toBe(5);
      expect((await bulk({ action: 'update_tier', tier: 'feed', max_items: 50_000, dry_run: true, filter: { tags: [tag] } })).body.matched).toBe(5);
      const run = await bulk({ action: 'update_tier', tier: 'feed', max_items: 5, filter: { tags: [tag] } });
      expectStatus(run, 200);
      expect(run.body.succeeded).toBe(5);
    });
  });

  describe('direct runs (200 Bulk result)', () => {
    it('transition: follows the lifecycle table item by item; a changed item gets a version and a revision', async () => {
      const targets: State[] = ['active', 'archived', 'trashed', 'revoked'];
      for (const to of targets) {
        const tag = freshTag(`to-${to}`);
        const byFrom = new Map<State, string>();
        for (const from of targets) byFrom.set(from, await itemIn(from, tag));
        const before = await versions([...byFrom.values()]);
        const res = await bulk({ action: 'transition', to_state: to, filter: { state: 'all', tags: [tag] } });
        expectStatus(res, 200);
        const cells = LIFECYCLE_TABLE.filter(([, cellTo]) => cellTo === to);
        const allowed = cells.filter(([, , ok]) => ok).map(([from]) => byFrom.get(from)!);
        const refused = cells.filter(([, , ok]) => !ok).map(([from]) => byFrom.get(from)!);
        expect(res.body).toEqual({
          action: 'transition',
          matched: 4,
          succeeded: allowed.length,
          errored: refused.length,
          dry_run: false,
          ids: expect.any(Array),
          errors: expect.any(Array),
        });
        expect(sorted(res.body.ids)).toEqual(sorted(allowed));
        expect(sorted(res.body.errors.map((e: any) => e.id))).toEqual(sorted(refused));
        const fromOf = new Map([...byFrom].map(([from, id]) => [id, from]));
        for (const e of res.body.errors) {
          expect(e).toEqual({ id: expect.any(String), code: 'invalid_transition', message: expect.any(String), details: { from: fromOf.get(e.id), to } });
          expect(e.message.length).toBeGreaterThan(0);
        }
        const after = await versions([...byFrom.values()]);
        for (const [from, id] of byFrom) {
          const item = await itemById(id);
          const ok = LIFECYCLE_TABLE.find(([f, tt]) => f === from && tt === to)![2];
          const moved = ok && from !== to;
          expect({ from, to, state: item.state, version: after.get(id) }).toEqual({
            from,
            to,
            state: ok ? to : from,
            version: before.get(id)! + (moved ? 1 : 0),
          });
        }
      }
    });

    it('transition: revisions and item.state_changed events for the changed items only', async () => {
      const tag = freshTag('revisions');
      const [a, b] = await seed(notes(2, tag));
      const archived = await itemIn('archived', tag);
      const res = await bulk({ action: 'transition', to_state: 'archived', filter: { state: 'all', tags: [tag] } });
      expectStatus(res, 200);
      expect(res.body).toMatchObject({ matched: 3, succeeded: 3, errored: 0, errors: [] });
      expect(sorted(res.body.ids)).toEqual(sorted([a, b, archived]));
      const history = await get(admin, `/items/${a}/versions`);
      expectStatus(history, 200);
      expect(history.body.versions.map((v: any) => v.version)).toEqual([2, 1]);
      expect(history.body.versions[0]).toMatchObject({ changed_by: adminId, item: { id: a, state: 'archived', version: 2 } });
      expect(history.body.versions[1].item).toMatchObject({ state: 'active', version: 1 });
      expect((await get(admin, `/items/${archived}/versions`)).body.versions.map((v: any) => v.version)).toEqual([1]);
      expect(await itemEvents([a, b])).toEqual({ 'item.created': 2, 'item.state_changed': 2 });
      expect(await itemEvents([archived])).toEqual({ 'item.created': 1 });
      // Running it again changes nothing: every item is already archived.
      const again = await bulk({ action: 'transition', to_state: 'archived', filter: { state: 'archived', tags: [tag] } });
      expect(again.body).toMatchObject({ matched: 3, succeeded: 3, errored: 0 });
      await expectVersions([a, b], 2);
      expect(await itemEvents([a, b])).toEqual({ 'item.created': 2, 'item.state_changed': 2 });
    });

    it('update_tags: adds, then removes; items already so are counted without a new version; a member key may do it', async () => {
      const tag = freshTag('tags');
      const [plain, hasKeep, hasBoth] = await seed([
        { type: 'core.note', properties: { title: 'plain' }, tags: [tag] },
        { type: 'core.note', properties: { title: 'keep' }, tags: [tag, 'keep', 'old'] },
        { type: 'core.note', properties: { title: 'both' }, tags: [tag, 'new'] },
      ]);
      const res = await bulk({ action: 'update_tags', add_tags: ['new'], remove_tags: ['old'], filter: { tags: [tag] } }, member.key);
      expectStatus(res, 200);
      expect(res.body).toMatchObject({ action: 'update_tags', matched: 3, succeeded: 3, errored: 0, errors: [] });
      expect((await itemById(plain)).tags).toEqual([tag, 'new']);
      expect((await itemById(hasKeep)).tags).toEqual([tag, 'keep', 'new']);
      expect((await itemById(hasBoth)).tags).toEqual([tag, 'new']);
      expect(await versions([plain, hasKeep, hasBoth])).toEqual(new Map([[plain, 2], [hasKeep, 2], [hasBoth, 1]]));
      // Either list may be empty; removing a tag the filter used.
      const only = await bulk({ action: 'update_tags', add_tags: [], remove_tags: ['keep'], filter: { tags: [tag] } }, member.key);
      expect(only.body).toMatchObject({ matched: 3, succeeded: 3 });
      expect((await itemById(hasKeep)).tags).toEqual([tag, 'new']);
      await expectVersions([hasKeep], 3);
      await expectVersions([plain], 2);
      expect(await itemEvents([plain, hasKeep, hasBoth])).toEqual({ 'item.created': 3, 'item.updated': 3 });
      const [latest] = (await get(admin, `/items/${hasKeep}/versions`)).body.versions;
      expect(latest).toMatchObject({ version: 3, changed_by: member.id });
    });

    it('update_tier and update_timestamp: change what differs, count the rest as succeeded', async () => {
      const tag = freshTag('tier');
      const [lib, feed] = await seed([
        { type: 'core.note', properties: { title: 'lib' }, tags: [tag], tier: 'library', timestamp: '2020-05-05T00:00:00Z' },
        { type: 'core.note', properties: { title: 'feed' }, tags: [tag], tier: 'feed', timestamp: '2021-06-06T12:00:00Z' },
      ]);
      const tier = await bulk({ action: 'update_tier', tier: 'feed', filter: { tags: [tag] } });
      expectStatus(tier, 200);
      expect(tier.body).toEqual({ action: 'update_tier', matched: 2, succeeded: 2, errored: 0, dry_run: false, ids: expect.any(Array), errors: [] });
      expect(sorted(tier.body.ids)).toEqual(sorted([lib, feed]));
      expect((await itemById(lib)).tier).toBe('feed');
      expect(await versions([lib, feed])).toEqual(new Map([[lib, 2], [feed, 1]]));

      const ts = await bulk({ action: 'update_timestamp', timestamp: '2021-06-06T14:00:00+02:00', filter: { tags: [tag] } });
      expectStatus(ts, 200);
      expect(ts.body).toMatchObject({ action: 'update_timestamp', matched: 2, succeeded: 2, errored: 0 });
      expect(new Date((await itemById(lib)).timestamp).toISOString()).toBe('2021-06-06T12:00:00.000Z');
      // The same instant in another offset is no change.
      expect(await versions([lib, feed])).toEqual(new Map([[lib, 3], [feed, 1]]));
      expect(await itemEvents([lib, feed])).toEqual({ 'item.created': 2, 'item.updated': 2 });
    });

    it('update_properties: shallow merge, null removes a key, each item checked against its type', async () => {
      const tag = freshTag('props');
      const [note, task, bookmark] = await seed([
        { type: 'core.note', properties: { title: 'note', body: 'old body', keep: { deep: 1 } }, tags: [tag] },
        { type: 'core.task', properties: { title: 'task', priority: 1 }, tags: [tag] },
        { type: 'core.bookmark', properties: { url: 'https://example.com/x', title: 'bm' }, tags: [tag] },
      ]);
      // priority 9 is out of core.task's 0..5; the others accept any extra property.
      const bad = await bulk({ action: 'update_properties', properties: { priority: 9, body: null }, filter: { tags: [tag] } });
      expectStatus(bad, 200);
      expect(bad.body).toMatchObject({ matched: 3, succeeded: 2, errored: 1 });
      expect(sorted(bad.body.ids)).toEqual(sorted([note, bookmark]));
      expect(bad.body.errors).toEqual([
        { id: task, code: 'invalid_properties', message: expect.any(String), details: { fields: [{ field: 'properties.priority', message: expect.any(String) }] } },
      ]);
      expect((await itemById(note)).properties).toEqual({ title: 'note', keep: { deep: 1 }, priority: 9 });
      expect((await itemById(task)).properties).toEqual({ title: 'task', priority: 1 });
      expect((await itemById(bookmark)).properties).toEqual({ url: 'https://example.com/x', title: 'bm', priority: 9 });
      expect(await versions([note, task, bookmark])).toEqual(new Map([[note, 2], [task, 1], [bookmark, 2]]));

      // Removing a required property: missing_required_field; items without it are unchanged.
      const required = await bulk({ action: 'update_properties', properties: { url: null }, filter: { tags: [tag] } });
      expectStatus(required, 200);
      expect(required.body).toMatchObject({ matched: 3, succeeded: 2, errored: 1 });
      expect(required.body.errors).toEqual([
        { id: bookmark, code: 'missing_required_field', message: expect.any(String), details: { fields: [{ field: 'properties.url', message: 'is required' }] } },
      ]);
      expect(await versions([note, task, bookmark])).toEqual(new Map([[note, 2], [task, 1], [bookmark, 2]]));

      // A value the schema accepts everywhere.
      const good = await bulk({ action: 'update_properties', properties: { priority: 3 }, filter: { tags: [tag] } });
      expect(good.body).toMatchObject({ matched: 3, succeeded: 3, errored: 0, errors: [] });
      expect((await itemById(task)).properties).toEqual({ title: 'task', priority: 3 });
      expect(await versions([note, task, bookmark])).toEqual(new Map([[note, 3], [task, 2], [bookmark, 3]]));
      // An invalid url format on the bookmark.
      const format = await bulk({ action: 'update_properties', properties: { url: 'not a url' }, filter: { tags: [tag], type: 'core.bookmark' } });
      expect(format.body).toMatchObject({ matched: 1, succeeded: 0, errored: 1, ids: [] });
      expect(format.body.errors[0]).toMatchObject({ id: bookmark, code: 'invalid_properties', details: { fields: [{ field: 'properties.url' }] } });
    });

    it('a per-item error carries its details: the reason a tag change is refused, the properties named, long lists cut', async () => {
      const tag = freshTag('details');
      const full = Array.from({ length: 99 }, (_, i) => `t${i}`);
      const [crowded, roomy] = await seed([
        { type: 'core.note', properties: { title: 'crowded' }, tags: [tag, ...full] },
        { type: 'core.note', properties: { title: 'roomy' }, tags: [tag] },
      ]);
      const tags = await bulk({ action: 'update_tags', add_tags: ['one-more'], filter: { tags: [tag] } });
      expectStatus(tags, 200);
      expect(tags.body).toMatchObject({ matched: 2, succeeded: 1, errored: 1, ids: [roomy] });
      expect(tags.body.errors).toEqual([
        {
          id: crowded,
          code: 'validation_error',
          message: expect.any(String),
          details: { fields: [{ field: 'add_tags', message: expect.stringContaining('at most 100 tags') }] },
        },
      ]);
      await expectVersions([crowded], 1);

      // A type whose every property may be wrong at once: the per-item error keeps the first few.
      const wide = 'bulkdetails.wide';
      const props = Array.from({ length: 12 }, (_, i) => `p${i}`);
      const created = await post(admin, '/types', {
        name: wide,
        schema: { type: 'object', properties: Object.fromEntries(props.map((k) => [k, { type: 'integer' }])) },
      });
      expectStatus(created, 201);
      const wideTag = freshTag('wide');
      const [item] = await seed([{ type: wide, properties: {}, tags: [wideTag] }]);
      const patch = Object.fromEntries(props.map((k) => [k, 'not a number']));
      const res = await bulk({ action: 'update_properties', properties: patch, filter: { tags: [wideTag] } });
      expectStatus(res, 200);
      expect(res.body).toMatchObject({ matched: 1, succeeded: 0, errored: 1 });
      const [e] = res.body.errors;
      expect(e).toMatchObject({ id: item, code: 'invalid_properties' });
      expect(e.details.fields).toHaveLength(5);
      for (const f of e.details.fields) expect(props.map((k) => `properties.${k}`)).toContain(f.field);
      // A single write of the same change names every field.
      const single = await t.http.patch(`/items/${item}`).set(bearer(admin)).send({ version: 1, properties: patch });
      expectError(single, 400, 'invalid_properties');
      expect(single.body.error.details.fields).toHaveLength(12);
    });

    it('emit_events: false records no item events; the changes and revisions are still made', async () => {
      const tag = freshTag('quiet');
      const ids = await seed(notes(3, tag));
      const res = await bulk({ action: 'transition', to_state: 'archived', emit_events: false, filter: { tags: [tag] } });
      expectStatus(res, 200);
      expect(res.body.succeeded).toBe(3);
      const res2 = await bulk({ action: 'update_tags', add_tags: ['quiet'], emit_events: false, filter: { state: 'archived', tags: [tag] } });
      expect(res2.body.succeeded).toBe(3);
      await expectVersions(ids, 3);
      expect(await itemEvents(ids)).toEqual({ 'item.created': 3 });
      expect((await get(admin, `/items/${ids[0]}/versions`)).body.versions.map((v: any) => v.version)).toEqual([3, 2, 1]);
    });

    it('runs exactly BULK_SYNC_MAX (1000) items directly, over two chunks, in one response', async () => {
      const tag = freshTag('sync-max');
      const ids = await seed(notes(1000, tag));
      const res = await bulk({ action: 'update_tier', tier: 'feed', filter: { tags: [tag] } });
      expectStatus(res, 200);
      expect(res.body).toMatchObject({ action: 'update_tier', matched: 1000, succeeded: 1000, errored: 0, dry_run: false, errors: [] });
      expect(sorted(res.body.ids)).toEqual(sorted(ids));
      await expectVersions(ids, 2);
      const revisions = await t.sql<{ n: number }>(`SELECT count(*)::int AS n FROM item_versions WHERE item_id = ANY($1::uuid[])`, [ids]);
      expect(revisions[0].n).toBe(2000);
    });
  });

  describe('purge', () => {
    it('hard-deletes the items, their edges both ways and their history; records item.deleted and edge.deleted', async () => {
      const tag = freshTag('purge');
      const keepTag = freshTag('purge-keep');
      expectStatus(await post(admin, '/edge-types', { name: 'bulk.link', source_types: ['*'], target_types: ['*'] }), 201);
      const [p1, p2] = await seed(notes(2, tag));
      const [k1, k2] = await seed(notes(2, keepTag));
      const edge = async (source: string, target: string) => {
        const res = await post(admin, '/edges', { type: 'bulk.link', source_id: source, target_id: target });
        expectStatus(res, 201);
        return res.body.id as string;
      };
      const edges = [await edge(p1, k1), await edge(k1, p2), await edge(p1, p2)];
      const keepEdge = await edge(k1, k2);
      // Give p1 some history first.
      expectStatus(await t.http.patch(`/items/${p1}`).set(bearer(admin)).send({ version: 1, properties: { title: 'edited' } }), 200);

      const res = await bulk({ action: 'purge', confirm: 'PURGE', filter: { tags: [tag] } });
      expectStatus(res, 200);
      expect(res.body).toEqual({
        action: 'purge',
        matched: 2,
        succeeded: 2,
        errored: 0,
        dry_run: false,
        ids: expect.any(Array),
        errors: [],
        blob_hashes_referenced: 0,
      });
      expect(sorted(res.body.ids)).toEqual(sorted([p1, p2]));
      expect((await versions([p1, p2, k1, k2])).size).toBe(2);
      expect(await t.sql(`SELECT item_id FROM item_versions WHERE item_id = ANY($1::uuid[])`, [[p1, p2]])).toEqual([]);
      expect(await t.sql(`SELECT id FROM edges WHERE id = ANY($1::uuid[])`, [edges])).toEqual([]);
      expect(await t.sql(`SELECT id FROM edges WHERE id = $1`, [keepEdge])).toHaveLength(1);
      expectError(await get(admin, `/items/${p1}`), 404, 'item_not_found');
      for (const id of edges) expectError(await get(admin, `/edges/${id}`), 404, 'edge_not_found');
      const k1Edges = await get(admin, `/items/${k1}/edges`);
      expectStatus(k1Edges, 200);
      expect(k1Edges.body.edges.map((e: any) => e.id)).toEqual([keepEdge]);
      expect(await itemEvents([p1, p2])).toEqual({ 'item.created': 2, 'item.updated': 1, 'item.deleted': 2 });
      const edgeEvents = await t.sql<{ id: string }>(`SELECT payload->'edge'->>'id' AS id FROM events WHERE name = 'edge.deleted' AND payload->'edge'->>'id' = ANY($1::text[])`, [edges]);
      expect(sorted(edgeEvents.map((e) => e.id))).toEqual(sorted(edges));
      const [deleted] = await t.sql<{ payload: any }>(`SELECT payload FROM events WHERE name = 'item.deleted' AND payload->'item'->>'id' = $1`, [p1]);
      expect(deleted.payload.item).toMatchObject({ id: p1, version: 2, properties: { title: 'edited' } });
    });

    it(`an item with more incoming edges than one statement takes (${EVENTS_PER_STATEMENT}): each edge.deleted once, no edge left, no statement past the batch`, async () => {
      expectStatus(await post(admin, '/edge-types', { name: 'bulk.into', source_types: ['*'], target_types: ['*'] }), 201);
      const tag = freshTag('purge-hub');
      const [hub] = await seed(notes(1, tag));
      const sources = await seed(notes(EVENTS_PER_STATEMENT + 50, freshTag('purge-hub-sources')));
      const edges = (
        await t.sql<{ id: string }>(
          `INSERT INTO edges (tenant_id, id, edge_type, source_id, target_id, created_by, created_at)
           SELECT tenant_id, gen_random_uuid(), 'bulk.into', id, $1, 'test', now() FROM items WHERE id = ANY($2::uuid[]) RETURNING id`,
          [hub, sources],
        )
      ).map((r) => r.id);
      // Watches (does not replace) the service's statements: how many edges each deletes, and
      // how many events each records.
      const perStatement: number[] = [];
      const query = PostgresQueryRunner.prototype.query;
      const spy = jest.spyOn(PostgresQueryRunner.prototype, 'query').mockImplementation(async function (this: PostgresQueryRunner, sql: string, params?: any, structured?: boolean) {
        const result = await query.call(this, sql, params, structured);
        if (sql.includes('DELETE FROM edges')) perStatement.push(Array.isArray(result) ? result.length : 0);
        if (sql.includes('INSERT INTO events')) perStatement.push(JSON.parse(params![2]).length);
        return result;
      });
      try {
        const res = await bulk({ action: 'purge', confirm: 'PURGE', filter: { tags: [tag] } });
        expectStatus(res, 200);
        expect(res.body).toMatchObject({ matched: 1, succeeded: 1, errored: 0 });
      } finally {
        spy.mockRestore();
      }
      expect(perStatement.length).toBeGreaterThan(0);
      expect(Math.max(...perStatement)).toBeLessThanOrEqual(EVENTS_PER_STATEMENT);
      expect(await t.sql(`SELECT id FROM edges WHERE target_id = $1`, [hub])).toEqual([]);
      const events = await t.sql<{ id: string }>(`SELECT payload->'edge'->>'id' AS id FROM events WHERE name = 'edge.deleted' AND payload->'edge'->>'id' = ANY($1::text[])`, [edges]);
      expect(events).toHaveLength(edges.length);
      expect(sorted(events.map((e) => e.id))).toEqual(sorted(edges));
    });

    it('with emit_events: false records neither item.deleted nor edge.deleted', async () => {
      const tag = freshTag('purge-quiet');
      const [a, b] = await seed(notes(2, tag));
      const e = await post(admin, '/edges', { type: 'bulk.link', source_id: a, target_id: b });
      expectStatus(e, 201);
      const res = await bulk({ action: 'purge', confirm: 'PURGE', emit_events: false, filter: { tags: [tag] } });
      expectStatus(res, 200);
      expect(res.body).toMatchObject({ matched: 2, succeeded: 2, blob_hashes_referenced: 0 });
      expect((await versions([a, b])).size).toBe(0);
      expect(await itemEvents([a, b])).toEqual({ 'item.created': 2 });
      expect(await t.sql(`SELECT 1 FROM events WHERE payload->'edge'->>'id' = $1 AND name = 'edge.deleted'`, [e.body.id])).toEqual([]);
    });

    it('counts the distinct blobs the purged items referred to (the blobs themselves stay)', async () => {
      const tag = freshTag('purge-blobs');
      const upload = async (text: string) => {
        const res = await t.http.post('/blobs').set(bearer(admin)).set('Content-Type', 'application/octet-stream').send(Buffer.from(text));
        expect([200, 201]).toContain(res.status);
        return res.body.ref as string;
      };
      const one = await upload(`blob one ${tag}`);
      const two = await upload(`blob two ${tag}`);
      const three = await upload(`blob three ${tag}`);
      const ids = await seed([
        { type: 'core.document', properties: { title: 'doc', blob: one }, tags: [tag] },
        { type: 'core.document', properties: { title: 'doc again', blob: one }, tags: [tag] },
        { type: 'core.note', properties: { title: 'nested', files: { a: two, b: one } }, tags: [tag] },
        { type: 'core.note', properties: { title: 'none' }, tags: [tag] },
      ]);
      // An item that is not purged refers to the third blob.
      await seed([{ type: 'core.note', properties: { title: 'kept', file: three }, tags: [freshTag('kept')] }]);
      const res = await bulk({ action: 'purge', confirm: 'PURGE', filter: { tags: [tag] } });
      expectStatus(res, 200);
      expect(res.body).toMatchObject({ matched: 4, succeeded: 4, errored: 0, blob_hashes_referenced: 2 });
      expect((await versions(ids)).size).toBe(0);
      for (const ref of [one, two, three]) expectStatus(await get(admin, `/blobs/${ref.slice(7)}/metadata`), 200);

      // As a job, the same count ends up in the result.
      const tag2 = freshTag('purge-blobs-job');
      await seed([
        { type: 'core.document', properties: { title: 'doc', blob: one }, tags: [tag2] },
        { type: 'core.note', properties: { title: 'n', x: three }, tags: [tag2] },
      ]);
      const submitted = await bulk({ action: 'purge', confirm: 'PURGE', async: true, filter: { tags: [tag2] } });
      expectStatus(submitted, 202);
      const done = await waitForJob(submitted.body.id, ended, 'the purge job');
      expect(done.status).toBe('completed');
      expect(done.result).toEqual({ action: 'purge', matched: 2, succeeded: 2, errored: 0, dry_run: false, errors: [], blob_hashes_referenced: 2 });
    });
  });

  describe('jobs', () => {
    it('async: 202 with a queued job and a Location; it runs to completed with a result and bulk_job.completed', async () => {
      const tag = freshTag('async');
      const ids = await seed(notes(3, tag));
      const trashed = await itemIn('trashed', tag);
      const res = await bulk({ action: 'transition', to_state: 'archived', async: true, filter: { state: 'all', tags: [tag] } });
      expectStatus(res, 202);
      // What it was asked to do, as sent, kept for good.
      const request = { filter: { state: 'all', tags: [tag] }, emit_events: true, max_items: 10_000, to_state: 'archived' };
      expect(res.body).toEqual({
        id: expect.any(String),
        action: 'transition',
        request,
        status: 'queued',
        matched: 4,
        processed: 0,
        succeeded: 0,
        errored: 0,
        cancel_requested: false,
        created_at: expect.stringMatching(RFC3339),
      });
      expect(res.headers.location).toBe(`/items/bulk_action/jobs/${res.body.id}`);
      const done = await waitForJob(res.body.id, ended, 'the job to end');
      expect(done).toEqual({
        id: res.body.id,
        action: 'transition',
        request,
        status: 'completed',
        matched: 4,
        processed: 4,
        succeeded: 3,
        errored: 1,
        cancel_requested: false,
        created_at: res.body.created_at,
        started_at: expect.stringMatching(RFC3339),
        finished_at: expect.stringMatching(RFC3339),
        result: {
          action: 'transition',
          matched: 4,
          succeeded: 3,
          errored: 1,
          dry_run: false,
          errors: [{ id: trashed, code: 'invalid_transition', message: expect.any(String), details: { from: 'trashed', to: 'archived' } }],
        },
      });
      expect(Date.parse(done.started_at)).toBeGreaterThanOrEqual(Date.parse(done.created_at));
      expect(Date.parse(done.finished_at)).toBeGreaterThanOrEqual(Date.parse(done.started_at));
      for (const id of ids) expect((await itemById(id)).state).toBe('archived');
      await expectVersions(ids, 2);
      expect((await itemById(trashed)).state).toBe('trashed');
      expect(await itemEvents(ids)).toEqual({ 'item.created': 3, 'item.state_changed': 3 });
      expect(await jobEvents(res.body.id)).toEqual(['bulk_job.completed']);
      // The following GET answers the same.
      expect((await job(res.body.id)).body).toEqual(done);
    });

    it('a job shows the property names an update_properties sets, not their values, and the filter as sent', async () => {
      const tag = freshTag('async-props');
      await seed(notes(2, tag));
      const res = await bulk({ action: 'update_properties', properties: { title: 'secret-ish value', body: null }, async: true, max_items: 5, filter: { tags: [tag], property: ['title!=x'] } });
      expectStatus(res, 202);
      const done = await waitForJob(res.body.id, ended, 'the job to end');
      expect(done.request).toEqual({ filter: { tags: [tag], property: ['title!=x'] }, emit_events: true, max_items: 5, property_names: ['title', 'body'] });
      expect(JSON.stringify(done)).not.toContain('secret-ish value');
      const listed = await t.http.get('/items/bulk_action/jobs?limit=1').set(bearer(admin));
      expect(listed.body.jobs[0]).toEqual(done);
    });

    it('async with emit_events: false records only the job\'s own event', async () => {
      const tag = freshTag('async-quiet');
      const ids = await seed(notes(2, tag));
      const res = await bulk({ action: 'update_tags', add_tags: ['q'], async: true, emit_events: false, filter: { tags: [tag] } });
      expectStatus(res, 202);
      const done = await waitForJob(res.body.id, ended, 'the job to end');
      expect(done).toMatchObject({ status: 'completed', matched: 2, processed: 2, succeeded: 2, errored: 0 });
      await expectVersions(ids, 2);
      expect(await itemEvents(ids)).toEqual({ 'item.created': 2 });
      expect(await jobEvents(res.body.id)).toEqual(['bulk_job.completed']);
    });

    it('async update_properties reports per-item errors in the result', async () => {
      const tag = freshTag('async-props');
      const [task, note] = await seed([
        { type: 'core.task', properties: { title: 'task' }, tags: [tag] },
        { type: 'core.note', properties: { title: 'note' }, tags: [tag] },
      ]);
      const res = await bulk({ action: 'update_properties', properties: { priority: 'high' }, async: true, filter: { tags: [tag] } });
      expectStatus(res, 202);
      const done = await waitForJob(res.body.id, ended, 'the job to end');
      expect(done).toMatchObject({ status: 'completed', matched: 2, processed: 2, succeeded: 1, errored: 1 });
      expect(done.result.errors).toEqual([
        { id: task, code: 'invalid_properties', message: expect.any(String), details: { fields: [{ field: 'properties.priority', message: expect.any(String) }] } },
      ]);
      expect(done.result).not.toHaveProperty('ids');
      expect(await versions([task, note])).toEqual(new Map([[task, 1], [note, 2]]));
    });

    it('a job keeps the first 1000 per-item errors; errored counts them all', async () => {
      const tag = freshTag('many-errors');
      const ids = await seed(
        Array.from({ length: 1001 }, (_, i) => ({ type: 'core.task', properties: { title: `task ${i}` }, tags: [tag] })),
      );
      // 1001 matches: a job without async.
      const res = await bulk({ action: 'update_properties', properties: { priority: -1 }, filter: { tags: [tag] } });
      expectStatus(res, 202);
      const done = await waitForJob(res.body.id, ended, 'the job to end');
      expect(done).toMatchObject({ status: 'completed', matched: 1001, processed: 1001, succeeded: 0, errored: 1001 });
      expect(done.result.errored).toBe(1001);
      expect(done.result.errors).toHaveLength(1000);
      expect(new Set(done.result.errors.map((e: any) => e.code))).toEqual(new Set(['invalid_properties']));
      expect(new Set(done.result.errors.map((e: any) => e.id)).size).toBe(1000);
      await expectVersions(ids, 1);
    });

    it('a job\'s end reaches the event stream of the credential that started it, not another member\'s', async () => {
      const tag = freshTag('sse');
      await seed(notes(1, tag));
      const mine = await SseClient.open(`${t.url}/events?events=bulk_job.*`, bearer(member.key));
      const theirs = await SseClient.open(`${t.url}/events?events=bulk_job.*`, bearer(member2.key));
      try {
        expect(mine.status).toBe(200);
        const res = await bulk({ action: 'update_tier', tier: 'feed', async: true, filter: { tags: [tag] } }, member.key);
        expectStatus(res, 202);
        const [e] = await waitFor(() => mine.named().length > 0 && mine.named(), 'the member\'s bulk_job event');
        expect(e).toMatchObject({ event: 'bulk_job.completed', body: { event: 'bulk_job.completed', job: { id: res.body.id, status: 'completed', matched: 1 } } });
        // The other member's own job's event comes after; it never saw the first one.
        const own = await bulk({ action: 'update_tier', tier: 'library', async: true, filter: { tags: [tag] } }, member2.key);
        expectStatus(own, 202);
        await waitFor(() => theirs.named().length > 0, 'the other member\'s own event');
        expect(theirs.named().map((x) => x.body.job.id)).toEqual([own.body.id]);
      } finally {
        mine.close();
        theirs.close();
      }
    });

    it('an empty match set as a job completes at once with zero counters', async () => {
      const res = await bulk({ action: 'update_tier', tier: 'feed', async: true, filter: { tags: [freshTag('empty-job')] } });
      expectStatus(res, 202);
      expect(res.body).toMatchObject({ status: 'queued', matched: 0 });
      const done = await waitForJob(res.body.id, ended, 'the empty job to end');
      expect(done).toMatchObject({ status: 'completed', matched: 0, processed: 0, succeeded: 0, errored: 0, result: { matched: 0, errors: [] } });
    });

    it('a job is visible to the credential that started it and to admins: 403 for another member, 404 elsewhere, 400 for a bad id', async () => {
      const tag = freshTag('visibility');
      await seed(notes(1, tag), member.key);
      const res = await bulk({ action: 'update_tier', tier: 'feed', async: true, filter: { tags: [tag] } }, member.key);
      expectStatus(res, 202);
      const id = res.body.id as string;
      const done = await waitForJob(id, ended, 'the member\'s job', member.key);
      expect(done.status).toBe('completed');
      expectStatus(await job(id), 200);
      expectError(await job(id, member2.key), 403, 'forbidden');
      expectError(await del(member2.key, `/items/bulk_action/jobs/${id}`), 403, 'forbidden');
      expectError(await job(id, other), 404, 'bulk_job_not_found');
      expectError(await del(other, `/items/bulk_action/jobs/${id}`), 404, 'bulk_job_not_found');
      const unknown = '3f0c1f9e-8d2a-4c71-9a55-2b1d6e0f4a11';
      expectError(await job(unknown), 404, 'bulk_job_not_found');
      expectError(await del(admin, `/items/bulk_action/jobs/${unknown}`), 404, 'bulk_job_not_found');
      expectError(await job(unknown, member.key), 404, 'bulk_job_not_found');
      expectError(await job('not-an-id'), 400, 'invalid_id');
      expectError(await del(admin, '/items/bulk_action/jobs/not-an-id'), 400, 'invalid_id');
      expectError(await job('12345'), 400, 'invalid_id');
      // Upper case is the same id.
      expect((await job(id.toUpperCase())).body.id).toBe(id);
    });

    it('an OAuth token sees, lists, cancels and hears the end of only the jobs of its client\'s tokens with no scope it lacks', async () => {
      const client = (await post(admin, '/auth/clients', { grant_types: ['client_credentials'], scope: 'core.note:write' }).expect(201)).body;
      const token = async (scope?: string) =>
        (await t.http.post('/auth/oauth2/token').auth(client.client_id, client.client_secret).type('form')
          .send({ grant_type: 'client_credentials', ...(scope ? { scope } : {}) }).expect(200)).body.access_token as string;
      const wide = await token('core.note:write');
      const narrow = await token();
      const [first] = await seed([{ type: 'core.note', properties: { title: 'the wide token\'s' } }], wide);
      const filter = { source: `app:${client.client_id}` };
      const listed = async (key: string) => (await get(key, '/items/bulk_action/jobs').expect(200)).body.jobs.map((j: any) => j.id);
      const wideHears = await SseClient.open(`${t.url}/events?events=bulk_job.*`, bearer(wide));
      const narrowHears = await SseClient.open(`${t.url}/events?events=bulk_job.*`, bearer(narrow));
      try {
        expect([wideHears.status, narrowHears.status]).toEqual([200, 200]);
        const id = await withRowLock(first, async (release, blocked) => {
          const res = await bulk({ action: 'update_tier', tier: 'feed', async: true, filter }, wide);
          expectStatus(res, 202);
          await blocked();
          // Both tokens stand for the client's credential; the narrower one does not own the wider one's job.
          expectError(await job(res.body.id, narrow), 403, 'forbidden');
          expectError(await del(narrow, `/items/bulk_action/jobs/${res.body.id}`), 403, 'forbidden');
          expect(await listed(narrow)).not.toContain(res.body.id);
          expect(await listed(wide)).toContain(res.body.id);
          await release();
          return res.body.id as string;
        });
        expect(await waitForJob(id, ended, 'the wide token\'s job', wide)).toMatchObject({ status: 'completed', cancel_requested: false, succeeded: 1 });
        // Ended, the row keeps of its starter only the scopes: the narrower token still does not own it.
        expect((await storedJob(id))?.principal).toEqual({ kind: 'oauth', scopes: ['core.note:write'] });
        expectError(await job(id, narrow), 403, 'forbidden');
        expect(await listed(narrow)).not.toContain(id);
        expect(await listed(wide)).toContain(id);
        await waitFor(() => wideHears.named().length > 0, 'the wide token\'s job event');
        expect(wideHears.named().map((e) => e.body.job.id)).toEqual([id]);
        // The narrow token's own job is its, and the wider token's too; its end is the first the narrow stream hears.
        const own = await bulk({ action: 'update_tier', tier: 'library', async: true, filter }, narrow);
        expectStatus(own, 202);
        await waitFor(() => narrowHears.named().length > 0, 'the narrow token\'s own job event');
        expect(narrowHears.named().map((e) => e.body.job.id)).toEqual([own.body.id]);
        expect(await listed(narrow)).toContain(own.body.id);
        expectStatus(await job(own.body.id, wide), 200);
        expectStatus(await job(id), 200);
      } finally {
        wideHears.close();
        narrowHears.close();
      }
    });

    it('DELETE on an ended job answers it unchanged (200)', async () => {
      const tag = freshTag('ended');
      await seed(notes(1, tag));
      const res = await bulk({ action: 'update_tier', tier: 'feed', async: true, filter: { tags: [tag] } });
      const done = await waitForJob(res.body.id, ended, 'the job to end');
      const cancel = await del(admin, `/items/bulk_action/jobs/${res.body.id}`);
      expectStatus(cancel, 200);
      expect(cancel.body).toEqual(done);
      expect((await job(res.body.id)).body).toEqual(done);
      expect(await jobEvents(res.body.id)).toEqual(['bulk_job.completed']);
    });

    it('an ended job keeps neither its spec nor its starter\'s permissions; it answers, lists and is owned as before', async () => {
      const tag = freshTag('ended-slim');
      await seed(notes(2, tag), member.key);
      const blob = 'x'.repeat(64 * 1024);
      const res = await bulk({ action: 'update_properties', properties: { blob }, async: true, filter: { type: 'core.note', tags: [tag] } }, member.key);
      expectStatus(res, 202);
      const done = await waitForJob(res.body.id, ended, 'the job to end', member.key);
      expect(done).toMatchObject({ status: 'completed', matched: 2, succeeded: 2 });
      expect(await storedJob(done.id)).toEqual({ spec: null, principal: { kind: 'api_key' }, item_ids: 0 });
      expect((await job(done.id, member.key)).body).toEqual(done);
      expect((await job(done.id)).body).toEqual(done);
      expectError(await job(done.id, member2.key), 403, 'forbidden');
      const listed = async (key: string) => (await get(key, '/items/bulk_action/jobs?status=completed').expect(200)).body.jobs;
      expect((await listed(member.key)).find((j: any) => j.id === done.id)).toEqual(done);
      expect((await listed(member2.key)).map((j: any) => j.id)).not.toContain(done.id);
      expect((await del(member.key, `/items/bulk_action/jobs/${done.id}`)).body).toEqual(done);
      // The end's event names the starter, and reaches it.
      const events = await t.sql<{ name: string; credential_id: string; audience: unknown }>(
        `SELECT name, credential_id, audience FROM events WHERE payload->'job'->>'id' = $1`,
        [done.id],
      );
      expect(events).toEqual([{ name: 'bulk_job.completed', credential_id: member.id, audience: { job_credential: member.id, job_scopes: null } }]);
    });

    it('deletes jobs ended more than BULK_JOB_RETENTION_DAYS (30) ago, and no other: not a later one, nor a running one however old', async () => {
      const tag = freshTag('retention');
      const [held] = await seed(notes(1, tag));
      const endJob = async () => {
        const res = await bulk({ action: 'update_tier', tier: 'feed', async: true, filter: { tags: [tag] } });
        expectStatus(res, 202);
        return (await waitForJob(res.body.id, ended, 'the job to end')).id as string;
      };
      const expired = await endJob();
      const kept = await endJob();
      const backdate = (id: string, days: number) =>
        t.sql(
          // created_at in whole milliseconds, as the list's cursors take it.
          `UPDATE bulk_jobs SET created_at = date_trunc('milliseconds', now()) - make_interval(days => $2 + 1), started_at = now() - make_interval(days => $2 + 1),
                  finished_at = now() - make_interval(days => $2) WHERE id = $1`,
          [id, days],
        );
      await backdate(expired, 31);
      await backdate(kept, 29);
      const janitor = t.app.get(BulkJanitor);
      await withRowLock(held, async (release, blocked) => {
        const res = await bulk({ action: 'update_tier', tier: 'library', async: true, filter: { tags: [tag] } });
        expectStatus(res, 202);
        await blocked();
        await t.sql(`UPDATE bulk_jobs SET created_at = date_trunc('milliseconds', now()) - interval '400 days', started_at = now() - interval '400 days' WHERE id = $1`, [res.body.id]);
        expect(await janitor.sweep()).toBe(1);
        expect((await job(res.body.id)).body).toMatchObject({ status: 'in_progress' });
        await release();
        expect(await waitForJob(res.body.id, ended, 'the running job to end')).toMatchObject({ status: 'completed', succeeded: 1 });
      });
      expectError(await job(expired), 404, 'bulk_job_not_found');
      expectError(await del(admin, `/items/bulk_action/jobs/${expired}`), 404, 'bulk_job_not_found');
      expect(await storedJob(expired)).toBeUndefined();
      expect((await job(kept)).body).toMatchObject({ id: kept, status: 'completed' });
      expect(await jobEvents(expired)).toEqual(['bulk_job.completed']);
      expect(await janitor.sweep()).toBe(0);
    });

    it('lists the caller\'s jobs (an admin: the tenant\'s) newest first, with cursor pagination and a status filter', async () => {
      const tag = freshTag('list');
      await seed(notes(1, tag));
      const memberJobs: string[] = [];
      for (let i = 0; i < 3; i++) {
        const res = await bulk({ action: 'update_tier', tier: i % 2 ? 'library' : 'feed', async: true, filter: { tags: [tag] } }, member.key);
        expectStatus(res, 202);
        memberJobs.push(res.body.id);
        await waitForJob(res.body.id, ended, 'the member job', member.key);
      }
      const adminJob = await bulk({ action: 'update_tier', tier: 'feed', async: true, filter: { tags: [tag] } });
      expectStatus(adminJob, 202);
      await waitForJob(adminJob.body.id, ended, 'the admin job');

      const all = async (key: string, query = '', limit = 2) => {
        const ids: string[] = [];
        let pages = 0;
        for (let cursor: string | null = null; pages < 200; pages++) {
          const res: Response = await get(key, `/items/bulk_action/jobs?limit=${limit}${query}${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`);
          expectStatus(res, 200);
          expect(Object.keys(res.body).sort()).toEqual(['jobs', 'next_cursor']);
          expect(res.body.jobs.length).toBeLessThanOrEqual(limit);
          ids.push(...res.body.jobs.map((j: any) => j.id));
          if (!(cursor = res.body.next_cursor)) break;
        }
        return ids;
      };
      const mine = await all(member.key);
      expect(mine.slice(0, 3)).toEqual([...memberJobs].reverse());
      expect(new Set(mine).size).toBe(mine.length);
      expect(mine).not.toContain(adminJob.body.id);
      const everything = await all(admin, '', 3);
      expect(everything[0]).toBe(adminJob.body.id);
      expect(everything.slice(1, 4)).toEqual([...memberJobs].reverse());
      expect(new Set(everything).size).toBe(everything.length);
      const theirs = await all(member2.key);
      expect(theirs.filter((id) => memberJobs.includes(id) || id === adminJob.body.id)).toEqual([]);
      expect(await all(other)).not.toContain(adminJob.body.id);
      // The listed job has the full shape.
      const first = await get(admin, '/items/bulk_action/jobs?limit=1');
      expect(first.body.jobs[0]).toEqual((await job(adminJob.body.id)).body);
      // Status filter.
      expect((await all(member.key, '&status=completed')).slice(0, 3)).toEqual([...memberJobs].reverse());
      expect(await all(member.key, '&status=queued')).toEqual([]);
      expect(badFields(await get(admin, '/items/bulk_action/jobs?status=done'))).toEqual(['status']);
      expect(badFields(await get(admin, '/items/bulk_action/jobs?limit=0'))).toEqual(['limit']);
      expect(badFields(await get(admin, '/items/bulk_action/jobs?limit=101'))).toEqual(['limit']);
    });

    it('pagination does not skip jobs created within the same millisecond', async () => {
      // Cursors carry created_at in milliseconds, so jobs store whole milliseconds; jobs that share
      // one (concurrent submissions do) are paged by id. Pinned through SQL to be deterministic.
      const tag = freshTag('same-ms');
      const key = (await createKey(t, admin, { label: 'same-ms', role: 'member', type_permissions: { 'core.note': 'write' } })).key;
      const ids: string[] = [];
      for (let i = 0; i < 3; i++) {
        const res = await bulk({ action: 'update_tier', tier: 'feed', async: true, filter: { tags: [tag] } }, key);
        expectStatus(res, 202);
        ids.push(res.body.id);
        await waitForJob(res.body.id, ended, 'the job', key);
      }
      const [{ n }] = await t.sql<{ n: number }>(`SELECT count(*)::int AS n FROM bulk_jobs WHERE created_at <> date_trunc('milliseconds', created_at)`);
      expect(n).toBe(0);
      await t.sql(`UPDATE bulk_jobs SET created_at = '2030-01-01T00:00:00.123Z' WHERE id = ANY($1::uuid[])`, [ids]);
      const seen: string[] = [];
      for (let cursor: string | null = null, i = 0; i < 10; i++) {
        const res: Response = await get(key, `/items/bulk_action/jobs?limit=1${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`);
        expectStatus(res, 200);
        seen.push(...res.body.jobs.map((j: any) => j.id));
        if (!(cursor = res.body.next_cursor)) break;
      }
      expect(seen).toEqual([...ids].sort().reverse());
    });

    it('a retried submission with the same Idempotency-Key gets the same job, started once', async () => {
      const tag = freshTag('idem');
      await seed(notes(2, tag));
      const body = { action: 'update_tier', tier: 'feed', async: true, filter: { tags: [tag] } };
      const count = async () => (await t.sql<{ n: number }>(`SELECT count(*)::int AS n FROM bulk_jobs`))[0].n;
      const before = await count();
      const first = await t.http.post('/items/bulk_action').set(bearer(admin)).set('Idempotency-Key', `bulk-${tag}`).send(body);
      expectStatus(first, 202);
      const second = await t.http.post('/items/bulk_action').set(bearer(admin)).set('Idempotency-Key', `bulk-${tag}`).send(body);
      expectStatus(second, 202);
      expect(second.body).toEqual(first.body);
      expect(second.headers['idempotent-replayed']).toBe('true');
      expect(await count()).toBe(before + 1);
      await waitForJob(first.body.id, ended, 'the job to end');
    });

    it('ids are fixed at submission: an item written meanwhile is not swept in', async () => {
      const tag = freshTag('fixed');
      const ids = await seed(notes(3, tag));
      const lock = new Client({ connectionString: t.databaseUrl });
      await lock.connect();
      let late: string;
      let jobId: string;
      try {
        await lock.query('BEGIN');
        await lock.query('SELECT 1 FROM items WHERE id = $1 FOR UPDATE', [ids[1]]);
        const res = await bulk({ action: 'update_tags', add_tags: ['swept'], async: true, filter: { tags: [tag] } });
        expectStatus(res, 202);
        jobId = res.body.id;
        await waitForJob(jobId, (j) => j.status === 'in_progress', 'the job to start');
        // The job cannot finish its only chunk while the lock is held.
        late = (await createOne({ type: 'core.note', properties: { title: 'late' }, tags: [tag] })).id;
        expect((await job(jobId)).body).toMatchObject({ status: 'in_progress', processed: 0 });
      } finally {
        await lock.query('ROLLBACK').catch(() => undefined);
        await lock.end();
      }
      const done = await waitForJob(jobId, ended, 'the job to end');
      expect(done).toMatchObject({ status: 'completed', matched: 3, processed: 3, succeeded: 3, errored: 0 });
      await expectVersions(ids, 2);
      expect(await itemById(late)).toMatchObject({ version: 1, tags: [tag] });
    });
  });

  describe('an item that no longer matches the filter when its chunk locks it', () => {
    /**
     * Purges five trashed items with `run` while the test holds the row a chunk locks first
     * (the lowest id), and meanwhile restores the last one (the highest id) to active: under
     * its lock that one no longer matches `state: trashed`.
     */
    async function purgeWhileOneIsRestored(run: (body: Body) => Promise<any>): Promise<{ purged: string[]; restored: string; outcome: any }> {
      const tag = freshTag('rematch');
      const ids: string[] = [];
      for (let i = 0; i < 5; i++) ids.push(await itemIn('trashed', tag));
      const order = sorted(ids);
      const restored = order[4];
      const outcome = await withRowLock(order[0], async (release, blocked) => {
        const pending = run({ action: 'purge', confirm: 'PURGE', filter: { state: 'trashed', tags: [tag] } });
        pending.catch(() => undefined); // awaited below; a failure must not surface as unhandled first
        await blocked();
        const { version } = await itemById(restored);
        expectStatus(await t.http.patch(`/items/${restored}`).set(bearer(admin)).send({ version, state: 'active' }), 200);
        await release();
        return pending;
      });
      return { purged: order.slice(0, 4), restored, outcome };
    }

    async function expectLeftAlone(purged: string[], restored: string): Promise<void> {
      expect(await versions([...purged, restored])).toEqual(new Map([[restored, 3]]));
      expect(await itemById(restored)).toMatchObject({ state: 'active', version: 3 });
      expect(await itemEvents([restored])).not.toHaveProperty('item.deleted');
    }

    it('a direct run leaves it alone, neither succeeded nor an error', async () => {
      const { purged, restored, outcome } = await purgeWhileOneIsRestored(async (body) => bulk(body));
      expectStatus(outcome, 200);
      expect(outcome.body).toMatchObject({ action: 'purge', matched: 5, succeeded: 4, errored: 0, errors: [] });
      expect(sorted(outcome.body.ids)).toEqual(purged);
      await expectLeftAlone(purged, restored);
    });

    it('a job leaves it alone, neither succeeded nor an error, and counts it processed', async () => {
      const { purged, restored, outcome } = await purgeWhileOneIsRestored(async (body) => {
        const res = await bulk({ ...body, async: true });
        expectStatus(res, 202);
        expect(res.body.matched).toBe(5);
        return waitForJob(res.body.id, ended, 'the job to end');
      });
      expect(outcome).toMatchObject({
        status: 'completed',
        matched: 5,
        processed: 5,
        succeeded: 4,
        errored: 0,
        result: { action: 'purge', matched: 5, succeeded: 4, errored: 0, errors: [] },
      });
      await expectLeftAlone(purged, restored);
    });
  });

  describe('cancellation and failure of a running job', () => {
    /** Three creation calls, so that the job's chunks are [c1], [c2], [c3] in creation order. */
    let c1: string[];
    let c2: string[];
    let c3: string[];
    let bigTag: string;

    beforeAll(async () => {
      bigTag = freshTag('big');
      c1 = await seed(notes(CHUNK, bigTag, { tags: [bigTag, 'c1'] }));
      c2 = await seed(notes(CHUNK, bigTag, { tags: [bigTag, 'c2'] }));
      c3 = await seed(notes(5, bigTag, { tags: [bigTag, 'c3'] }));
    });

    it('more than BULK_SYNC_MAX matches run as a job (202) without async; a DELETE while it runs stops it between chunks', async () => {
      const all = [...c1, ...c2, ...c3];
      const result = await withRowLock(c2[7], async (release, blocked) => {
        const res = await bulk({ action: 'update_tags', add_tags: ['cancelled-run'], filter: { tags: [bigTag] } });
        expectStatus(res, 202);
        expect(res.body).toMatchObject({ status: 'queued', matched: 1005, processed: 0 });
        const id = res.body.id as string;
        // The first chunk commits; the second waits for the locked row.
        const running = await waitForJob(id, (j) => j.status === 'in_progress' && j.processed >= CHUNK, 'the first chunk');
        await blocked();
        expect(running).toMatchObject({ processed: CHUNK, succeeded: CHUNK, cancel_requested: false });
        expect(running).not.toHaveProperty('result');
        expect(running).not.toHaveProperty('finished_at');
        expect(running.started_at).toMatch(RFC3339);
        const listed = await get(admin, '/items/bulk_action/jobs?status=in_progress');
        expect(listed.body.jobs.map((j: any) => j.id)).toEqual([id]);
        const cancel = await del(admin, `/items/bulk_action/jobs/${id}`);
        expectStatus(cancel, 200);
        expect(cancel.body).toMatchObject({ id, status: 'in_progress', cancel_requested: true });
        expect(cancel.body).not.toHaveProperty('result');
        // Asking again changes nothing.
        expect((await del(admin, `/items/bulk_action/jobs/${id}`)).body).toMatchObject({ status: 'in_progress', cancel_requested: true });
        await release();
        return waitForJob(id, ended, 'the job to stop');
      });
      // The chunk in flight when the cancel came is finished; nothing after it is.
      expect(result).toMatchObject({
        status: 'cancelled',
        cancel_requested: true,
        matched: 1005,
        processed: 2 * CHUNK,
        succeeded: 2 * CHUNK,
        errored: 0,
        finished_at: expect.stringMatching(RFC3339),
        result: { action: 'update_tags', matched: 1005, succeeded: 2 * CHUNK, errored: 0, dry_run: false, errors: [] },
      });
      await expectVersions([...c1, ...c2], 2);
      await expectVersions(c3, 1);
      expect((await itemById(c3[0])).tags).not.toContain('cancelled-run');
      expect((await itemById(c2[7])).tags).toContain('cancelled-run');
      expect(await jobEvents(result.id)).toEqual(['bulk_job.cancelled']);
      const updated = await t.sql<{ n: number }>(
        `SELECT count(*)::int AS n FROM events WHERE name = 'item.updated' AND payload->'item'->>'id' = ANY($1::text[])`,
        [all],
      );
      expect(updated[0].n).toBe(2 * CHUNK);
      // Ended: a DELETE answers it as it is.
      const again = await del(admin, `/items/bulk_action/jobs/${result.id}`);
      expectStatus(again, 200);
      expect(again.body).toEqual(result);
      expect((await get(admin, '/items/bulk_action/jobs?status=cancelled')).body.jobs.map((j: any) => j.id)).toContain(result.id);
    });

    it('a DELETE during a job\'s last chunk (here its only one) ends it cancelled, its counters showing all was done', async () => {
      const tag = freshTag('last-chunk');
      const ids = await seed(notes(3, tag));
      const result = await withRowLock(sorted(ids)[1], async (release, blocked) => {
        const res = await bulk({ action: 'update_tags', add_tags: ['cancelled-late'], async: true, filter: { tags: [tag] } });
        expectStatus(res, 202);
        const id = res.body.id as string;
        await waitForJob(id, (j) => j.status === 'in_progress', 'the job to start');
        // Its only chunk waits for the locked row.
        await blocked();
        const cancel = await del(admin, `/items/bulk_action/jobs/${id}`);
        expectStatus(cancel, 200);
        expect(cancel.body).toMatchObject({ id, status: 'in_progress', processed: 0, cancel_requested: true });
        await release();
        return waitForJob(id, ended, 'the job to end');
      });
      // The chunk in flight was finished, and it was the last: everything was done, yet the
      // cancel the DELETE acknowledged is what the job ends as.
      expect(result).toMatchObject({
        status: 'cancelled',
        cancel_requested: true,
        matched: 3,
        processed: 3,
        succeeded: 3,
        errored: 0,
        finished_at: expect.stringMatching(RFC3339),
        result: { action: 'update_tags', matched: 3, succeeded: 3, errored: 0, dry_run: false, errors: [] },
      });
      await expectVersions(ids, 2);
      expect(await jobEvents(result.id)).toEqual(['bulk_job.cancelled']);
      const again = await del(admin, `/items/bulk_action/jobs/${result.id}`);
      expectStatus(again, 200);
      expect(again.body).toEqual(result);
    });

    it('fails the job when the API key that started it is revoked, between chunks', async () => {
      const k = await createKey(t, admin, { label: 'to revoke', role: 'member', type_permissions: { 'core.note': 'write' } });
      const result = await withRowLock(c2[3], async (release, blocked) => {
        const res = await bulk({ action: 'update_tags', add_tags: ['revoked-run'], filter: { tags: [bigTag] } }, k.key);
        expectStatus(res, 202);
        const id = res.body.id as string;
        await waitForJob(id, (j) => j.status === 'in_progress' && j.processed >= CHUNK, 'the first chunk');
        // The second chunk has started (with the credential as it was then) and waits for the row.
        await blocked();
        expectStatus(await del(admin, `/keys/${k.id}`), 200);
        await release();
        return waitForJob(id, ended, 'the job to stop');
      });
      expect(result).toMatchObject({
        status: 'failed',
        matched: 1005,
        processed: 2 * CHUNK,
        succeeded: 2 * CHUNK,
        error: expect.any(String),
        finished_at: expect.stringMatching(RFC3339),
        result: { matched: 1005, succeeded: 2 * CHUNK, errored: 0 },
      });
      expect((await itemById(c1[0])).tags).toContain('revoked-run');
      expect((await itemById(c3[0])).tags).not.toContain('revoked-run');
      await expectVersions(c3, 1);
      expect(await jobEvents(result.id)).toEqual(['bulk_job.failed']);
    });

    it('checks each chunk against the credential\'s permissions as they are then: a type no longer writable errors per item', async () => {
      const k = await createKey(t, admin, { label: 'narrowed', role: 'member', type_permissions: { 'core.note': 'write' } });
      const result = await withRowLock(c2[11], async (release, blocked) => {
        const res = await bulk({ action: 'update_tags', add_tags: ['narrowed-run'], filter: { tags: [bigTag] } }, k.key);
        expectStatus(res, 202);
        const id = res.body.id as string;
        await waitForJob(id, (j) => j.status === 'in_progress' && j.processed >= CHUNK, 'the first chunk');
        // The second chunk has started (with the credential as it was then) and waits for the row.
        await blocked();
        expectStatus(await t.http.patch(`/keys/${k.id}`).set(bearer(admin)).send({ type_permissions: { 'core.note': 'read' } }), 200);
        await release();
        return waitForJob(id, ended, 'the job to end');
      });
      expect(result).toMatchObject({ status: 'completed', matched: 1005, processed: 1005, succeeded: 2 * CHUNK, errored: 5 });
      expect(sorted(result.result.errors.map((e: any) => e.id))).toEqual(sorted(c3));
      expect(new Set(result.result.errors.map((e: any) => e.code))).toEqual(new Set(['type_not_permitted']));
      // Each error is the one a single write answers: code, message and details.
      const single = await t.http.patch(`/items/${c3[0]}`).set(bearer(k.key)).send({ version: 1, tier: 'feed' });
      expectError(single, 403, 'type_not_permitted');
      expect(single.body.error.details).toEqual({ type: 'core.note' });
      expect(result.result.errors.find((e: any) => e.id === c3[0])).toEqual({ id: c3[0], ...single.body.error });
      expect((await itemById(c3[0])).tags).not.toContain('narrowed-run');
      expect((await itemById(c2[0])).tags).toContain('narrowed-run');
    });

    it('an item purged after submission is a per-item item_not_found', async () => {
      const result = await withRowLock(c2[20], async (release, blocked) => {
        const res = await bulk({ action: 'update_tier', tier: 'feed', filter: { tags: [bigTag] } });
        expectStatus(res, 202);
        const id = res.body.id as string;
        await waitForJob(id, (j) => j.status === 'in_progress' && j.processed >= CHUNK, 'the first chunk');
        // The second chunk has started (with the credential as it was then) and waits for the row.
        await blocked();
        const purge = await bulk({ action: 'purge', confirm: 'PURGE', filter: { tags: ['c3', bigTag] } });
        expectStatus(purge, 200);
        expect(purge.body.succeeded).toBe(5);
        await release();
        return waitForJob(id, ended, 'the job to end');
      });
      expect(result).toMatchObject({ status: 'completed', matched: 1005, processed: 1005, succeeded: 2 * CHUNK, errored: 5 });
      expect(sorted(result.result.errors.map((e: any) => e.id))).toEqual(sorted(c3));
      expect(new Set(result.result.errors.map((e: any) => e.code))).toEqual(new Set(['item_not_found']));
    });

    it('fails a purge job when the key that started it is no longer an admin, between chunks', async () => {
      const k = await createKey(t, admin, { label: 'to demote', role: 'admin' });
      const tag = freshTag('demoted');
      const d1 = await seed(notes(CHUNK, tag, { tags: [tag, 'd1'] }));
      const d2 = await seed(notes(CHUNK, tag, { tags: [tag, 'd2'] }));
      const d3 = await seed(notes(5, tag, { tags: [tag, 'd3'] }));
      const result = await withRowLock(d2[3], async (release, blocked) => {
        const res = await bulk({ action: 'purge', confirm: 'PURGE', filter: { tags: [tag] } }, k.key);
        expectStatus(res, 202);
        const id = res.body.id as string;
        await waitForJob(id, (j) => j.status === 'in_progress' && j.processed >= CHUNK, 'the first chunk');
        // The second chunk has started (with the credential as it was then) and waits for the row.
        await blocked();
        expectStatus(await t.http.patch(`/keys/${k.id}`).set(bearer(admin)).send({ role: 'member', type_permissions: { 'core.note': 'write' } }), 200);
        await release();
        return waitForJob(id, ended, 'the job to stop');
      });
      expect(result).toMatchObject({
        status: 'failed',
        matched: 1005,
        processed: 2 * CHUNK,
        succeeded: 2 * CHUNK,
        error: expect.stringContaining('admin'),
        finished_at: expect.stringMatching(RFC3339),
        result: { action: 'purge', matched: 1005, succeeded: 2 * CHUNK, errored: 0 },
      });
      expect((await versions([...d1, ...d2])).size).toBe(0);
      await expectVersions(d3, 1);
      expect(await jobEvents(result.id)).toEqual(['bulk_job.failed']);
    });
  });

  describe('queued jobs (an instance that runs no jobs)', () => {
    let q: TestApp;
    let qAdmin: string;

    beforeAll(async () => {
      q = await startApp({ BULK_CONCURRENCY: '0', BULK_SYNC_MAX: '2' });
      qAdmin = (await bootstrapAdmin(q)).key;
    });
    afterAll(async () => {
      await q?.close();
    });

    const qBulk = (body: Body, key = qAdmin) => q.http.post('/items/bulk_action').set(bearer(key)).send(body);

    it('BULK_SYNC_MAX decides: up to it a direct run (200), above it a job (202)', async () => {
      const two = await seed(notes(2, 'two'), qAdmin, q);
      const direct = await qBulk({ action: 'update_tier', tier: 'feed', filter: { tags: ['two'] } });
      expectStatus(direct, 200);
      expect(direct.body).toMatchObject({ matched: 2, succeeded: 2 });
      expect(await versions(two, q)).toEqual(new Map(two.map((id) => [id, 2])));
      await seed(notes(3, 'three'), qAdmin, q);
      const queued = await qBulk({ action: 'update_tier', tier: 'feed', filter: { tags: ['three'] } });
      expectStatus(queued, 202);
      expect(queued.body).toMatchObject({ status: 'queued', matched: 3 });
      // Nothing runs it here.
      const res = await q.http.get(`/items/bulk_action/jobs/${queued.body.id}`).set(bearer(qAdmin));
      expect(res.body).toMatchObject({ status: 'queued', processed: 0 });
      expect(res.body).not.toHaveProperty('started_at');
      expect(res.body).not.toHaveProperty('result');
    });

    it('a DELETE cancels a queued job at once; again, it answers the same', async () => {
      const ids = await seed(notes(3, 'cancel-me'), qAdmin, q);
      const submitted = await qBulk({ action: 'transition', to_state: 'archived', async: true, filter: { tags: ['cancel-me'] } });
      expectStatus(submitted, 202);
      const id = submitted.body.id as string;
      const listedQueued = await q.http.get('/items/bulk_action/jobs?status=queued').set(bearer(qAdmin));
      expect(listedQueued.body.jobs.map((j: any) => j.id)).toContain(id);
      const cancel = await q.http.delete(`/items/bulk_action/jobs/${id}`).set(bearer(qAdmin));
      expectStatus(cancel, 200);
      expect(cancel.body).toEqual({
        id,
        action: 'transition',
        request: submitted.body.request,
        status: 'cancelled',
        matched: 3,
        processed: 0,
        succeeded: 0,
        errored: 0,
        cancel_requested: true,
        created_at: submitted.body.created_at,
        finished_at: expect.stringMatching(RFC3339),
        result: { action: 'transition', matched: 3, succeeded: 0, errored: 0, dry_run: false, errors: [] },
      });
      const again = await q.http.delete(`/items/bulk_action/jobs/${id}`).set(bearer(qAdmin));
      expectStatus(again, 200);
      expect(again.body).toEqual(cancel.body);
      expect((await q.http.get(`/items/bulk_action/jobs/${id}`).set(bearer(qAdmin))).body).toEqual(cancel.body);
      expect(await versions(ids, q)).toEqual(new Map(ids.map((i) => [i, 1])));
      expect(await jobEvents(id, q)).toEqual(['bulk_job.cancelled']);
      const listed = await q.http.get('/items/bulk_action/jobs?status=cancelled').set(bearer(qAdmin));
      expect(listed.body.jobs.map((j: any) => j.id)).toEqual([id]);
      expect((await q.http.get('/items/bulk_action/jobs?status=queued').set(bearer(qAdmin))).body.jobs.map((j: any) => j.id)).not.toContain(id);
    });

    it('a DELETE cancels at once a started job no worker holds (its lease given up or lapsed), not one whose lease runs', async () => {
      const ids = await seed(notes(3, 'orphaned'), qAdmin, q);
      /** A job as a worker leaves it: started, one chunk done, its lease `lease` (lapsed: killed; NULL: stopped). */
      const started = async (lease: string) => {
        const submitted = await qBulk({ action: 'update_tier', tier: 'feed', async: true, filter: { tags: ['orphaned'] } });
        expectStatus(submitted, 202);
        const id = submitted.body.id as string;
        await q.sql(`UPDATE bulk_jobs SET status = 'in_progress', started_at = now(), processed = 1, succeeded = 1, lease_owner = 'gone', lease_until = ${lease} WHERE id = $1`, [id]);
        return id;
      };
      const running = await started(`now() + interval '1 hour'`);
      const held = await q.http.delete(`/items/bulk_action/jobs/${running}`).set(bearer(qAdmin));
      expectStatus(held, 200);
      expect(held.body).toMatchObject({ status: 'in_progress', cancel_requested: true });
      expect(await jobEvents(running, q)).toEqual([]);
      await q.sql(`UPDATE bulk_jobs SET status = 'failed', finished_at = now() WHERE id = $1`, [running]); // out of the tenant's cap
      for (const lease of [`now() - interval '1 second'`, 'NULL']) {
        const id = await started(lease);
        const cancel = await q.http.delete(`/items/bulk_action/jobs/${id}`).set(bearer(qAdmin));
        expectStatus(cancel, 200);
        expect(cancel.body).toMatchObject({ status: 'cancelled', processed: 1, succeeded: 1, cancel_requested: true, finished_at: expect.stringMatching(RFC3339) });
        expect((await q.http.get(`/items/bulk_action/jobs/${id}`).set(bearer(qAdmin))).body).toEqual(cancel.body);
        expect(await jobEvents(id, q)).toEqual(['bulk_job.cancelled']);
      }
      expect(await versions(ids, q)).toEqual(new Map(ids.map((i) => [i, 1])));
    });

    it('a queued job is never deleted however old; one cancelled while queued keeps only what is read, and goes after the retention', async () => {
      await seed(notes(1, 'retained'), qAdmin, q);
      const submit = async () => {
        const res = await qBulk({ action: 'update_tier', tier: 'feed', async: true, filter: { tags: ['retained'] } });
        expectStatus(res, 202);
        return res.body.id as string;
      };
      const waiting = await submit();
      const cancelled = await submit();
      expectStatus(await q.http.delete(`/items/bulk_action/jobs/${cancelled}`).set(bearer(qAdmin)), 200);
      expect(await storedJob(cancelled, q)).toEqual({ spec: null, principal: { kind: 'api_key' }, item_ids: 0 });
      expect(await storedJob(waiting, q)).toMatchObject({ spec: { action: 'update_tier', tier: 'feed' }, item_ids: 1 });
      await q.sql(`UPDATE bulk_jobs SET created_at = date_trunc('milliseconds', now()) - interval '400 days', updated_at = now() - interval '400 days' WHERE id = $1`, [waiting]);
      await q.sql(`UPDATE bulk_jobs SET created_at = date_trunc('milliseconds', now()) - interval '32 days', finished_at = now() - interval '31 days' WHERE id = $1`, [cancelled]);
      expect(await q.app.get(BulkJanitor).sweep()).toBe(1);
      expectError(await q.http.get(`/items/bulk_action/jobs/${cancelled}`).set(bearer(qAdmin)), 404, 'bulk_job_not_found');
      expect((await q.http.get(`/items/bulk_action/jobs/${waiting}`).set(bearer(qAdmin))).body).toMatchObject({ status: 'queued', matched: 1 });
    });

    it('the member that started a queued job may cancel it; another member may not', async () => {
      const m1 = await createKey(q, qAdmin, { label: 'm1', role: 'member', type_permissions: { '*': 'write' } });
      const m2 = await createKey(q, qAdmin, { label: 'm2', role: 'member', type_permissions: { '*': 'write' } });
      await seed(notes(1, 'members'), m1.key, q);
      const submitted = await qBulk({ action: 'update_tier', tier: 'feed', async: true, filter: { tags: ['members'] } }, m1.key);
      expectStatus(submitted, 202);
      const id = submitted.body.id as string;
      expectError(await q.http.delete(`/items/bulk_action/jobs/${id}`).set(bearer(m2.key)), 403, 'forbidden');
      expect((await q.http.get(`/items/bulk_action/jobs/${id}`).set(bearer(m1.key))).body.status).toBe('queued');
      const cancel = await q.http.delete(`/items/bulk_action/jobs/${id}`).set(bearer(m1.key));
      expectStatus(cancel, 200);
      expect(cancel.body.status).toBe('cancelled');
    });
  });

  describe('a tenant\'s unfinished jobs are capped (BULK_JOBS_MAX_UNFINISHED_PER_TENANT)', () => {
    // Three workers, a cap of two: a tenant's two jobs held running by a row lock leave a worker free.
    const CAP = 2;
    let c: TestApp;
    let cRoot: string;

    beforeAll(async () => {
      c = await startApp({ BULK_CONCURRENCY: '3', BULK_JOBS_MAX_UNFINISHED_PER_TENANT: String(CAP) });
      cRoot = (await bootstrapAdmin(c)).key;
    });
    afterAll(async () => {
      await c?.close();
    });

    const cBulk = (key: string, body: Body) => c.http.post('/items/bulk_action').set(bearer(key)).send(body);
    const cJob = (key: string, id: string, done: (j: any) => boolean, what: string) => waitForJob(id, done, what, key, c);
    const tierJob = (key: string, tag: string) => cBulk(key, { action: 'update_tier', tier: 'feed', async: true, filter: { tags: [tag] } });

    async function unfinished(tenantKey: string): Promise<number> {
      const res = await c.http.get('/items/bulk_action/jobs?limit=100').set(bearer(tenantKey));
      expectStatus(res, 200);
      return res.body.jobs.filter((j: any) => j.status === 'queued' || j.status === 'in_progress').length;
    }

    function expectCapped(res: Response): void {
      const error = expectError(res, 429, 'rate_limited');
      expect(error.details).toMatchObject({ limit: CAP, unfinished: CAP });
      expect(Number(res.headers['retry-after'])).toBeGreaterThan(0);
    }

    it('past the cap a job is 429 rate_limited (Retry-After); direct runs and dry runs still go; another tenant creates and runs a job; an ended job frees its place (the refused request, retried with its Idempotency-Key)', async () => {
      const a = await createTenant(c, cRoot, 'bulk-cap-a');
      const b = await createTenant(c, cRoot, 'bulk-cap-b');
      const [held] = await seed(notes(1, 'cap-held'), a.key, c);
      await seed(notes(3, 'cap-direct'), a.key, c);
      await seed(notes(1, 'cap-b'), b.key, c);
      await withRowLock(held, async (release, blocked) => {
        const first = await tierJob(a.key, 'cap-held');
        expectStatus(first, 202);
        await blocked();
        const second = await tierJob(a.key, 'cap-held');
        expectStatus(second, 202);
        expectCapped(await tierJob(a.key, 'cap-held').set('Idempotency-Key', 'bulk-cap-retry'));
        expectCapped(await tierJob(a.key, 'cap-direct'));
        expect(await unfinished(a.key)).toBe(CAP);
        // Only jobs count: a direct run and a dry run of the same tenant go ahead.
        const direct = await cBulk(a.key, { action: 'update_tier', tier: 'feed', filter: { tags: ['cap-direct'] } });
        expectStatus(direct, 200);
        expect(direct.body).toMatchObject({ matched: 3, succeeded: 3 });
        expectStatus(await cBulk(a.key, { action: 'update_tier', tier: 'feed', dry_run: true, async: true, filter: { tags: ['cap-direct'] } }), 200);
        // Another tenant is not held back by the first one's cap, and its job runs meanwhile.
        const other = await tierJob(b.key, 'cap-b');
        expectStatus(other, 202);
        await cJob(b.key, other.body.id, (j) => j.status === 'completed', 'the other tenant\'s job to complete');
        expect((await c.http.get(`/items/bulk_action/jobs/${first.body.id}`).set(bearer(a.key))).body.status).toBe('in_progress');
        await release();
        for (const j of [first, second]) await cJob(a.key, j.body.id, (x) => x.status === 'completed', 'the held jobs to complete');
      }, c);
      // The refusal was not kept for its Idempotency-Key: the same request, retried, starts the job.
      const again = await tierJob(a.key, 'cap-held').set('Idempotency-Key', 'bulk-cap-retry');
      expectStatus(again, 202);
      await cJob(a.key, again.body.id, ended, 'the job after the held ones');
    });

    it('concurrent submissions do not pass the cap together; a cancelled job frees its place', async () => {
      const a = await createTenant(c, cRoot, 'bulk-cap-race');
      const [held] = await seed(notes(1, 'race-held'), a.key, c);
      await withRowLock(held, async (release) => {
        const burst = await Promise.all(Array.from({ length: 8 }, () => tierJob(a.key, 'race-held')));
        const accepted = burst.filter((r) => r.status === 202);
        expect(accepted).toHaveLength(CAP);
        for (const r of burst.filter((x) => x.status !== 202)) expectCapped(r);
        const rows = await c.sql<{ n: number }>(`SELECT count(*)::int AS n FROM bulk_jobs WHERE tenant_id = $1`, [a.tenantId]);
        expect(rows[0].n).toBe(CAP);
        // A cancel frees the place once the job has ended (a running one at its next chunk boundary).
        const cancelled = accepted[0].body.id as string;
        expectStatus(await c.http.delete(`/items/bulk_action/jobs/${cancelled}`).set(bearer(a.key)), 200);
        await cJob(a.key, cancelled, (j) => j.status === 'cancelled', 'the cancelled job to end');
        const next = await tierJob(a.key, 'race-held');
        expectStatus(next, 202);
        expectCapped(await tierJob(a.key, 'race-held'));
        await release();
        for (const id of [accepted[1].body.id, next.body.id]) await cJob(a.key, id, ended, 'the remaining jobs to end');
      }, c);
    });
  });

  it('is documented in the OpenAPI document', async () => {
    const res = await t.http.get('/openapi.json');
    expectStatus(res, 200);
    const paths = res.body.paths;
    expect(paths['/items/bulk_action']?.post).toBeDefined();
    expect(paths['/items/bulk_action/jobs']?.get).toBeDefined();
    expect(paths['/items/bulk_action/jobs/{id}']?.get).toBeDefined();
    expect(paths['/items/bulk_action/jobs/{id}']?.delete).toBeDefined();
    expect(Object.keys(paths['/items/bulk_action'].post.responses)).toEqual(expect.arrayContaining(['200', '202', '400', '401', '403']));
    expect(Object.keys(paths['/items/bulk_action/jobs/{id}'].delete.responses)).toEqual(expect.arrayContaining(['200', '401', '403', '404']));
  });
});
