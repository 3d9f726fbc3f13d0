/** Small helpers shared by the item and type e2e specs (not a spec itself). */
import type { Response } from 'supertest';
import { bearer, TestApp } from '../support/app';

/** Every field of SPEC 2.1 plus `tags` (CONTRACT "Items"). */
export const ITEM_FIELDS = [
  'id', 'type', 'properties', 'state', 'version', 'schema_version', 'source', 'source_id', 'timestamp', 'created_at',
  'updated_at', 'tier', 'tenant_id', 'device', 'capture_latitude', 'capture_longitude', 'edges', 'extensions', 'tags',
].sort();

export const RFC3339 = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?Z$/;

export { expectError } from '../support/envelope';

/** Asserts a status; the failure diff shows the whole body. */
export function expectStatus(res: Response, status: number): void {
  if (res.status !== status) expect({ status: res.status, body: res.body }).toEqual({ status, body: '(see above)' });
}

export interface Api {
  get(path: string, query?: Record<string, string | number | undefined>): Promise<Response>;
  post(path: string, body?: unknown): Promise<Response>;
  patch(path: string, body?: unknown): Promise<Response>;
  delete(path: string): Promise<Response>;
}

/** HTTP calls authenticated with `key`. Each returns a real promise, so Promise.all runs them concurrently. */
export function api(t: TestApp, key: string): Api {
  const h = bearer(key);
  return {
    get: async (path, query) => t.http.get(path).query(query ?? {}).set(h),
    post: async (path, body) => t.http.post(path).set(h).send(body as object),
    patch: async (path, body) => t.http.patch(path).set(h).send(body as object),
    delete: async (path) => t.http.delete(path).set(h),
  };
}

/** Creates an item and returns its body, failing loudly on anything but 201. */
export async function createItem(c: Api, body: Record<string, unknown>): Promise<Record<string, any>> {
  const res = await c.post('/items', body);
  expectStatus(res, 201);
  return res.body;
}

export const note = (title: string, extra: Record<string, unknown> = {}) => ({ type: 'core.note', properties: { title }, ...extra });

export type Query = Record<string, string | number | undefined>;

export const ids = (items: Array<{ id: string }>): string[] => items.map((i) => i.id);

/** Every page of `GET /items` under `query`, following cursors: the pages' ids, none repeated, each page at most `limit`. */
export async function pages(c: Api, query: Query, limit: number): Promise<string[][]> {
  const out: string[][] = [];
  let cursor: string | undefined;
  do {
    const res = await c.get('/items', { ...query, limit, cursor });
    expectStatus(res, 200);
    expect(res.body.items.length).toBeLessThanOrEqual(limit);
    out.push(ids(res.body.items));
    cursor = res.body.next_cursor ?? undefined;
    expect(out.length).toBeLessThan(100);
  } while (cursor);
  const all = out.flat();
  expect(new Set(all).size).toBe(all.length);
  return out;
}

/** The ids of every page of `GET /items` under `query`, in order. */
export const listed = async (c: Api, query: Query, limit = 2): Promise<string[]> => (await pages(c, query, limit)).flat();
