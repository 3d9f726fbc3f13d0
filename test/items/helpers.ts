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
