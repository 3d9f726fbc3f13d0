/**
 * The item lifecycle over HTTP: every cell of the 4x4 table in src/items/lifecycle.ts via
 * PATCH {version, state}, initial states on create, and DELETE (to trashed).
 */
import { bootstrapAdmin, startApp, TestApp } from '../support/app';
import { LIFECYCLE_TABLE, State } from '../support/lifecycle-table';
import { Api, api, createItem, expectError, expectStatus, note } from './helpers';

const CELLS = LIFECYCLE_TABLE;

describe('items: lifecycle', () => {
  let t: TestApp;
  let admin: Api;

  beforeAll(async () => {
    t = await startApp();
    admin = api(t, (await bootstrapAdmin(t)).key);
  });
  afterAll(() => t?.close());

  /** A fresh item in `state`; returns its id and current version. */
  async function itemIn(state: State): Promise<{ id: string; version: number }> {
    if (state === 'active' || state === 'archived') {
      const item = await createItem(admin, note(`in ${state}`, { state }));
      expect(item.state).toBe(state);
      return { id: item.id, version: item.version };
    }
    const item = await createItem(admin, note(`to ${state}`));
    const res = state === 'trashed' ? await admin.delete(`/items/${item.id}`) : await admin.patch(`/items/${item.id}`, { version: item.version, state });
    expectStatus(res, 200);
    expect(res.body.state).toBe(state);
    return { id: item.id, version: res.body.version };
  }

  it('the table covers all 16 cells', () => {
    expect(new Set(CELLS.map(([f, to]) => `${f}>${to}`)).size).toBe(16);
  });

  it.each(CELLS)('PATCH %s → %s: allowed = %s', async (from, to, allowed) => {
    const { id, version } = await itemIn(from);
    const res = await admin.patch(`/items/${id}`, { version, state: to });
    if (allowed) {
      expectStatus(res, 200);
      expect(res.body.state).toBe(to);
      expect((await admin.get(`/items/${id}`)).body.state).toBe(to);
    } else {
      expectError(res, 400, 'invalid_transition');
      const after = await admin.get(`/items/${id}`);
      expect(after.body).toMatchObject({ state: from, version });
    }
  });

  it('a rejected transition rolls back the other fields of the same PATCH', async () => {
    const { id, version } = await itemIn('trashed');
    expectError(await admin.patch(`/items/${id}`, { version, state: 'archived', properties: { title: 'changed' }, tags: ['x'] }), 400, 'invalid_transition');
    const after = await admin.get(`/items/${id}`);
    expect(after.body).toMatchObject({ state: 'trashed', version, properties: { title: 'to trashed' }, tags: [] });
  });

  it('a stale PATCH of the state alone is merged, but still obeys the table against the current state', async () => {
    const item = await createItem(admin, note('stale state'));
    expectStatus(await admin.delete(`/items/${item.id}`), 200); // now trashed, version 2
    expectError(await admin.patch(`/items/${item.id}`, { version: 1, state: 'archived' }), 400, 'invalid_transition');
    const restored = await admin.patch(`/items/${item.id}`, { version: 1, state: 'active' });
    expectStatus(restored, 200);
    expect(restored.body).toMatchObject({ state: 'active', version: 3 });
  });

  it('new items start active or archived; trashed or revoked → 400 invalid_transition and nothing is stored', async () => {
    expect((await createItem(admin, note('a'))).state).toBe('active');
    expect((await createItem(admin, note('b', { state: 'archived' }))).state).toBe('archived');
    for (const state of ['trashed', 'revoked']) {
      expectError(await admin.post('/items', note(`start ${state}`, { state })), 400, 'invalid_transition');
      const rows = await t.sql(`SELECT count(*)::int AS n FROM items WHERE properties->>'title' = $1`, [`start ${state}`]);
      expect(rows[0]).toEqual({ n: 0 });
    }
  });

  it('DELETE moves active, archived and revoked items to trashed', async () => {
    for (const from of ['active', 'archived', 'revoked'] as const) {
      const { id, version } = await itemIn(from);
      const res = await admin.delete(`/items/${id}`);
      expectStatus(res, 200);
      expect(res.body).toMatchObject({ state: 'trashed', version: version + 1 });
    }
  });

  it('a revoked item is not revived through the trash, by PATCH or by a bulk transition; it can still be purged', async () => {
    const revoked = await itemIn('revoked');
    const trashed = await admin.delete(`/items/${revoked.id}`);
    expectStatus(trashed, 200);
    expectError(await admin.patch(`/items/${revoked.id}`, { version: trashed.body.version, state: 'active' }), 400, 'invalid_transition');
    const bulk = await admin.post('/items/bulk_action', { action: 'transition', to_state: 'active', filter: { state: 'trashed' }, max_items: 50 });
    expectStatus(bulk, 200);
    expect((await admin.get(`/items/${revoked.id}`)).body.state).toBe('trashed');
    // An item trashed from another state comes back as before.
    const archived = await itemIn('archived');
    const thrown = await admin.delete(`/items/${archived.id}`);
    expectStatus(await admin.patch(`/items/${archived.id}`, { version: thrown.body.version, state: 'active' }), 200);
    const purge = await admin.post('/items/bulk_action', { action: 'purge', confirm: 'PURGE', filter: { state: 'trashed' }, max_items: 50 });
    expectStatus(purge, 200);
    expectError(await admin.get(`/items/${revoked.id}`), 404, 'item_not_found');
  });

  it('every move is a recorded revision', async () => {
    const { id } = await itemIn('active');
    let version = 1;
    for (const state of ['archived', 'active', 'trashed', 'active', 'revoked', 'trashed'] as const) {
      const res = await admin.patch(`/items/${id}`, { version, state });
      expectStatus(res, 200);
      version = res.body.version;
    }
    const history = await admin.get(`/items/${id}/versions`);
    expect(history.body.versions.map((v: any) => v.item.state)).toEqual(['trashed', 'revoked', 'active', 'trashed', 'active', 'archived', 'active']);
  });

  it('the history pages by `before`: next_before names where the next page starts, null on the last', async () => {
    const { id } = await itemIn('active');
    let version = 1;
    for (const state of ['archived', 'active', 'archived', 'active'] as const) {
      version = (await admin.patch(`/items/${id}`, { version, state })).body.version;
    }
    const pages: number[][] = [];
    let before: number | null | undefined;
    do {
      const res = await admin.get(`/items/${id}/versions?limit=2${before ? `&before=${before}` : ''}`);
      expectStatus(res, 200);
      pages.push(res.body.versions.map((v: any) => v.version));
      before = res.body.next_before;
    } while (before !== null && pages.length < 10);
    expect(pages).toEqual([[5, 4], [3, 2], [1]]);
  });
});
