/**
 * DELETE /blobs/{hash} over real HTTP, once per storage backend: the record and the content go,
 * admins only, tenant by tenant; refused while an item in any state refers to the blob (not a
 * revision); and safe against concurrent item writes and uploads. The races are made
 * deterministic with a second PostgreSQL session that holds the lock the other side takes,
 * waiting until the request is seen blocked on it (pg_blocking_pids), never for a fixed time.
 */
import { createHash, randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import { mkdtemp, readdir, rm } from 'node:fs/promises';
import http from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PassThrough } from 'node:stream';
import { Client } from 'pg';
import { blobAddressKey } from '../src/blobs/blob-address-lock';
import { bearer, bootstrapAdmin, createKey, createTenant, startApp, TestApp } from './support/app';
import { expectError } from './support/envelope';
import { waitFor } from './support/wait';

const sha256 = (data: Buffer): string => createHash('sha256').update(data).digest('hex');
const ref = (hash: string) => `sha256:${hash}`;

describe.each(['disk', 'postgres'] as const)('blob deletion (%s storage)', (storage) => {
  let t: TestApp;
  let blobDir: string;
  let admin: { key: string; id: string; tenantId: string };

  const upload = (key: string, bytes: Buffer) => t.http.post('/blobs').set(bearer(key)).set('Content-Type', 'application/octet-stream').send(bytes);
  const remove = (key: string, hash: string) => t.http.delete(`/blobs/${hash}`).set(bearer(key));
  const download = (key: string, hash: string) =>
    t.http.get(`/blobs/${hash}`).set(bearer(key)).buffer(true).parse((res, cb) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => cb(null, Buffer.concat(chunks)));
    });
  const createItem = async (key: string, properties: Record<string, unknown>, extra: Record<string, unknown> = {}) =>
    (await t.http.post('/items').set(bearer(key)).send({ type: 'core.note', properties, ...extra }).expect(201)).body as { id: string; version: number };

  /** A new blob of the admin's tenant. */
  async function newBlob(key = admin.key): Promise<{ hash: string; bytes: Buffer }> {
    const bytes = randomBytes(3000);
    await upload(key, bytes).expect(201);
    return { hash: sha256(bytes), bytes };
  }

  /** Whether the store holds the content at the tenant's address. */
  async function contentStored(tenantId: string, hash: string): Promise<boolean> {
    if (storage === 'disk') return existsSync(join(blobDir, tenantId, hash.slice(0, 2), hash));
    const rows = await t.sql('SELECT 1 FROM blob_chunks WHERE tenant_id = $1 AND hash = $2', [tenantId, hash]);
    return rows.length > 0;
  }

  /** A second session, for holding locks as a concurrent request would. */
  async function session(): Promise<{ client: Client; pid: number }> {
    const client = new Client({ connectionString: t.databaseUrl });
    await client.connect();
    const [{ pid }] = (await client.query('SELECT pg_backend_pid() AS pid')).rows;
    return { client, pid };
  }

  /** Waits until a request is blocked by `pid`'s locks; fails if it answers first. */
  async function expectBlockedBy(pid: number, request: Promise<unknown>): Promise<void> {
    let settled = false;
    void request.then(
      () => (settled = true),
      () => (settled = true),
    );
    const outcome = await waitFor(
      async () => (settled ? 'answered' : (await t.sql('SELECT 1 FROM pg_stat_activity WHERE $1 = ANY(pg_blocking_pids(pid))', [pid])).length > 0 && 'blocked'),
      'the request to wait for the other session',
    );
    expect(outcome).toBe('blocked');
  }

  beforeAll(async () => {
    blobDir = await mkdtemp(join(tmpdir(), `svc-blob-deletion-${storage}-`));
    t = await startApp({ BLOB_STORAGE: storage, BLOB_DIR: blobDir });
    admin = await bootstrapAdmin(t);
  });
  afterAll(async () => {
    await t.close();
    await rm(blobDir, { recursive: true, force: true });
  });

  it('deletes the record and the content: 200 with the record, then 404 everywhere, not listed, audited blob.deleted', async () => {
    const { hash, bytes } = await newBlob();
    expect(await contentStored(admin.tenantId, hash)).toBe(true);

    const res = await remove(admin.key, `sha256:${hash}`).expect(200);
    expect(res.body).toMatchObject({ hash, ref: ref(hash), size: bytes.length, content_type: 'application/octet-stream' });

    expectError(await t.http.get(`/blobs/${hash}`).set(bearer(admin.key)), 404, 'blob_not_found');
    expectError(await t.http.get(`/blobs/${hash}/metadata`).set(bearer(admin.key)), 404, 'blob_not_found');
    expect((await t.http.head(`/blobs/${hash}`).set(bearer(admin.key))).status).toBe(404);
    const listed = (await t.http.get('/blobs').query({ limit: 100 }).set(bearer(admin.key)).expect(200)).body.blobs.map((b: { hash: string }) => b.hash);
    expect(listed).not.toContain(hash);
    expect(await contentStored(admin.tenantId, hash)).toBe(false);

    const audit = (await t.http.get('/audit').query({ action: 'blob.deleted' }).set(bearer(admin.key)).expect(200)).body.events;
    expect(audit.find((e: { details: { hash: string } }) => e.details.hash === hash)?.details).toEqual({
      actor: { kind: 'api_key', id: admin.id },
      hash,
      size: bytes.length,
      content_type: 'application/octet-stream',
    });
  });

  it('takes the same bytes again afterwards as a new blob, which reads back', async () => {
    const { hash, bytes } = await newBlob();
    await remove(admin.key, hash).expect(200);
    await upload(admin.key, bytes).expect(201);
    const got = await download(admin.key, hash).expect(200);
    expect((got.body as Buffer).equals(bytes)).toBe(true);
    expect(await contentStored(admin.tenantId, hash)).toBe(true);
  });

  it('404 blob_not_found for an unknown hash and for a second deletion; a malformed hash is 400 invalid_id as on GET', async () => {
    const { hash } = await newBlob();
    await remove(admin.key, hash).expect(200);
    expectError(await remove(admin.key, hash), 404, 'blob_not_found');
    expectError(await remove(admin.key, sha256(Buffer.from('never uploaded'))), 404, 'blob_not_found');
    for (const bad of ['zz', 'AB'.repeat(32), `md5:${'ab'.repeat(32)}`]) {
      expect(expectError(await remove(admin.key, bad), 400, 'invalid_id').details).toEqual({ field: 'hash' });
    }
  });

  it('403 forbidden for a member, even one that may write every type; the blob stays', async () => {
    const { hash, bytes } = await newBlob();
    const writer = await createKey(t, admin.key, { role: 'member', type_permissions: { '*': 'write' } });
    expectError(await remove(writer.key, hash), 403, 'forbidden');
    expect(((await download(admin.key, hash).expect(200)).body as Buffer).equals(bytes)).toBe(true);
  });

  it('another tenant\'s blob is 404 and untouched; of the same bytes held by two tenants, deleting one\'s keeps the other\'s', async () => {
    const other = await createTenant(t, admin.key, `blob-deletion-${storage}`);
    const { hash, bytes } = await newBlob();
    expectError(await remove(other.key, hash), 404, 'blob_not_found');
    expect(((await download(admin.key, hash).expect(200)).body as Buffer).equals(bytes)).toBe(true);

    await upload(other.key, bytes).expect(201);
    await remove(other.key, hash).expect(200);
    expectError(await t.http.get(`/blobs/${hash}`).set(bearer(other.key)), 404, 'blob_not_found');
    expect(await contentStored(other.tenantId, hash)).toBe(false);
    expect(await contentStored(admin.tenantId, hash)).toBe(true);
    expect(((await download(admin.key, hash).expect(200)).body as Buffer).equals(bytes)).toBe(true);
  });

  it('409 conflict (blob_in_use) naming the items that refer to it, active, trashed or revoked, nested too; deletable once none does', async () => {
    const { hash, bytes } = await newBlob();
    const active = await createItem(admin.key, { title: 'active', file: ref(hash) });
    const trashed = await createItem(admin.key, { title: 'trashed', attachments: [{ blob: ref(hash) }] }, { tags: ['drop-refs'] });
    await t.http.delete(`/items/${trashed.id}`).set(bearer(admin.key)).expect(200);
    const revoked = await createItem(admin.key, { title: 'revoked', file: ref(hash) }, { tags: ['drop-refs'] });
    await t.http.patch(`/items/${revoked.id}`).set(bearer(admin.key)).send({ version: revoked.version, state: 'revoked' }).expect(200);
    await createItem(admin.key, { title: `mentions ${hash} in passing`, other: `${ref(hash)}-not-a-reference` });

    const refused = expectError(await remove(admin.key, hash), 409, 'conflict');
    expect(refused.details).toEqual({ reason: 'blob_in_use', items: [active.id, trashed.id, revoked.id].sort(), item_count: 3 });
    expect(((await download(admin.key, hash).expect(200)).body as Buffer).equals(bytes)).toBe(true);

    await t.http.patch(`/items/${active.id}`).set(bearer(admin.key)).send({ version: active.version, properties: { file: null } }).expect(200);
    await t.http.delete(`/items/${revoked.id}`).set(bearer(admin.key)).expect(200);
    const purge = await t.http
      .post('/items/bulk_action')
      .set(bearer(admin.key))
      .send({ action: 'purge', confirm: 'PURGE', filter: { tags: ['drop-refs'], state: 'trashed' } })
      .expect(200);
    expect(purge.body.succeeded).toBe(2);
    await remove(admin.key, hash).expect(200);
  });

  it('names at most 10 of the referring items, by id, and counts them all', async () => {
    const { hash } = await newBlob();
    const items = Array.from({ length: 12 }, (_, i) => ({ type: 'core.note', properties: { title: `n${i}`, file: ref(hash) } }));
    const res = await t.http.post('/items/bulk').set(bearer(admin.key)).send({ mode: 'create_only', items }).expect(200);
    const ids = (res.body.results as Array<{ id: string }>).map((r) => r.id).sort();
    expect(expectError(await remove(admin.key, hash), 409, 'conflict').details).toEqual({ reason: 'blob_in_use', items: ids.slice(0, 10), item_count: 12 });
  });

  it('a reference kept only in an item\'s revisions does not hold the blob; the revision still names it, and it reads 404', async () => {
    const { hash } = await newBlob();
    const item = await createItem(admin.key, { title: 'had a file', file: ref(hash) });
    await t.http.patch(`/items/${item.id}`).set(bearer(admin.key)).send({ version: item.version, properties: { file: null } }).expect(200);
    await remove(admin.key, hash).expect(200);
    const versions = (await t.http.get(`/items/${item.id}/versions`).set(bearer(admin.key)).expect(200)).body.versions as Array<{ item: { properties: Record<string, unknown> } }>;
    expect(versions.some((v) => v.item.properties.file === ref(hash))).toBe(true);
    expectError(await t.http.get(`/blobs/${hash}`).set(bearer(admin.key)), 404, 'blob_not_found');
  });

  it('an upload of the same bytes under way when the blob is deleted completes, and its content is there', async () => {
    const { hash, bytes } = await newBlob();
    const body = new PassThrough();
    const answer = new Promise<number>((resolve, reject) => {
      const req = http.request(new URL('/blobs', t.url), { method: 'POST', headers: { ...bearer(admin.key), 'Content-Type': 'application/octet-stream' }, agent: false });
      req.on('response', (res) => {
        res.resume();
        res.on('end', () => resolve(res.statusCode ?? 0));
      });
      req.on('error', reject);
      body.pipe(req);
    });
    body.write(bytes.subarray(0, 1000));
    await waitFor(async () => (await readdir(join(blobDir, '.staging')).catch(() => [])).length > 0, 'the upload to be staged');
    await remove(admin.key, hash).expect(200);
    body.end(bytes.subarray(1000));
    expect(await answer).toBe(201);
    expect(((await download(admin.key, hash).expect(200)).body as Buffer).equals(bytes)).toBe(true);
  });

  describe('against concurrent writers', () => {
    it('a deletion waits for an item write that holds the blob (key share, to its commit), then sees its item and refuses', async () => {
      const { hash } = await newBlob();
      const item = await createItem(admin.key, { title: 'about to refer' });
      const writer = await session();
      try {
        // What an item write does: check the blob (holding it) and write the item, not yet committed.
        await writer.client.query('BEGIN');
        await writer.client.query('SELECT 1 FROM blobs WHERE tenant_id = $1 AND hash = $2 FOR KEY SHARE', [admin.tenantId, hash]);
        await writer.client.query(`UPDATE items SET properties = properties || jsonb_build_object('file', $3::text) WHERE tenant_id = $1 AND id = $2`, [
          admin.tenantId,
          item.id,
          ref(hash),
        ]);
        const deletion = remove(admin.key, hash).then((r) => r);
        await expectBlockedBy(writer.pid, deletion);
        await writer.client.query('COMMIT');
        expect(expectError(await deletion, 409, 'conflict').details).toEqual({ reason: 'blob_in_use', items: [item.id], item_count: 1 });
      } finally {
        await writer.client.end();
      }
      await t.http.get(`/blobs/${hash}`).set(bearer(admin.key)).expect(200);
    });

    it('an item write naming a blob being deleted waits for the deletion, then is refused (400) and writes nothing', async () => {
      const { hash } = await newBlob();
      const deleter = await session();
      try {
        // What a deletion does: lock the row for update, then delete it.
        await deleter.client.query('BEGIN');
        await deleter.client.query('SELECT 1 FROM blobs WHERE tenant_id = $1 AND hash = $2 FOR UPDATE', [admin.tenantId, hash]);
        const write = t.http.post('/items').set(bearer(admin.key)).send({ type: 'core.note', properties: { title: 'too late', file: ref(hash) } }).then((r) => r);
        await expectBlockedBy(deleter.pid, write);
        await deleter.client.query('DELETE FROM blobs WHERE tenant_id = $1 AND hash = $2', [admin.tenantId, hash]);
        await deleter.client.query('COMMIT');
        const refused = expectError(await write, 400, 'validation_error');
        expect(refused.details?.fields.map((f: { field: string }) => f.field)).toEqual(['properties.file']);
      } finally {
        await deleter.client.end();
      }
      expect(await t.sql(`SELECT 1 FROM items WHERE tenant_id = $1 AND properties->>'title' = 'too late'`, [admin.tenantId])).toEqual([]);
    });

    it('a bulk update_properties naming a blob being deleted waits for the deletion, then fails each item (validation_error), changing none', async () => {
      const { hash } = await newBlob();
      const tag = `bulk-${storage}`;
      const item = await createItem(admin.key, { title: 'bulk target' }, { tags: [tag] });
      const deleter = await session();
      try {
        await deleter.client.query('BEGIN');
        await deleter.client.query('SELECT 1 FROM blobs WHERE tenant_id = $1 AND hash = $2 FOR UPDATE', [admin.tenantId, hash]);
        const bulk = t.http
          .post('/items/bulk_action')
          .set(bearer(admin.key))
          .send({ action: 'update_properties', properties: { file: ref(hash) }, filter: { tags: [tag] } })
          .then((r) => r);
        await expectBlockedBy(deleter.pid, bulk);
        await deleter.client.query('DELETE FROM blobs WHERE tenant_id = $1 AND hash = $2', [admin.tenantId, hash]);
        await deleter.client.query('COMMIT');
        const res = await bulk;
        expect(res.status).toBe(200);
        expect(res.body).toMatchObject({ succeeded: 0, errored: 1 });
        expect(res.body.errors.map((e: { id: string; code: string }) => [e.id, e.code])).toEqual([[item.id, 'validation_error']]);
      } finally {
        await deleter.client.end();
      }
      expect((await t.http.get(`/items/${item.id}`).set(bearer(admin.key)).expect(200)).body.properties).toEqual({ title: 'bulk target' });
    });

    it('the content is removed only once no upload of the same bytes is between storing it and recording it', async () => {
      const { hash, bytes } = await newBlob();
      const uploader = await session();
      try {
        // An upload of the same bytes at its last step: content stored, its row about to be written.
        await uploader.client.query('BEGIN');
        await uploader.client.query('SELECT pg_advisory_xact_lock(hashtext($1))', [blobAddressKey(admin.tenantId, hash)]);
        const deletion = remove(admin.key, hash).then((r) => r);
        await expectBlockedBy(uploader.pid, deletion);
        await uploader.client.query(
          `INSERT INTO blobs (tenant_id, hash, size, content_type, created_at) VALUES ($1, $2, $3, 'application/octet-stream', now())`,
          [admin.tenantId, hash, bytes.length],
        );
        await uploader.client.query('COMMIT');
        expect((await deletion).status).toBe(200);
      } finally {
        await uploader.client.end();
      }
      // The upload's record names content that is still there.
      expect(((await download(admin.key, hash).expect(200)).body as Buffer).equals(bytes)).toBe(true);
    });
  });

  it('documents DELETE /blobs/{hash} in /openapi.json', async () => {
    const op = (await t.http.get('/openapi.json').expect(200)).body.paths['/blobs/{hash}'].delete;
    expect(op.operationId).toBe('deleteBlob');
    expect(Object.keys(op.responses)).toEqual(expect.arrayContaining(['200', '400', '403', '404', '409']));
    expect(op.responses['409'].description).toMatch(/blob_in_use/);
  });
});

