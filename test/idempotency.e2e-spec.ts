/**
 * Idempotency keys (src/idempotency) through real HTTP on POST /keys, the decorated route that
 * exists on every server: replays, conflicts, concurrency, kept errors, per-credential keys,
 * header checks and expiry. SQL is used only to count rows and to age or stage rows.
 */
import { randomUUID } from 'node:crypto';
import type { Response } from 'supertest';
import { keyDigest, requestFingerprint } from '../src/idempotency/idempotency-key';
import { IdempotencyJanitor } from '../src/idempotency/idempotency.janitor';
import { IdempotencyStore } from '../src/idempotency/idempotency.store';
import { ResponseSeal } from '../src/idempotency/response-seal';
import { badFields, expectError } from './support/envelope';
import { Client } from 'pg';
import { bearer, bootstrapAdmin, createKey, startApp, TestApp } from './support/app';
import { waitFor } from './support/wait';

const IDEM = 'Idempotency-Key';
const replayed = (res: Response) => res.headers['idempotent-replayed'] === 'true';

describe('idempotency keys', () => {
  let t: TestApp;
  let admin: { key: string; id: string; tenantId: string };
  const post = (body: object, key?: string, token: string | undefined = admin.key) => {
    let req = t.http.post('/keys');
    if (token) req = req.set(bearer(token));
    if (key !== undefined) req = req.set(IDEM, key);
    return req.send(body);
  };
  const keysLabelled = async (label: string) =>
    Number((await t.sql<{ n: string }>('SELECT count(*) AS n FROM api_keys WHERE label = $1', [label]))[0].n);

  beforeAll(async () => (t = await startApp()));
  afterAll(() => t.close());

  it('never keeps the bootstrap POST /keys: a retry with the same Idempotency-Key gets 401, not the root admin key', async () => {
    const idem = randomUUID();
    const first = await t.http.post('/keys').set(IDEM, idem).send({ label: 'root admin' });
    expect(first.status).toBe(201);
    expect(first.body.key).toMatch(/^svc_k1_/);
    expect(replayed(first)).toBe(false);
    admin = { key: first.body.key, id: first.body.id, tenantId: first.body.tenant_id };
    expect(await t.sql('SELECT 1 FROM idempotency_keys')).toHaveLength(0);

    const retry = await t.http.post('/keys').set(IDEM, idem).send({ label: 'root admin' });
    expectError(retry, 401, 'unauthorized');
    expect(JSON.stringify(retry.body)).not.toContain(first.body.key);
    expectError(await t.http.post('/keys').send({ label: 'root admin' }), 401, 'unauthorized');

    const list = await t.http.get('/keys').set(bearer(admin.key)).expect(200);
    expect(list.body.keys.map((k: { id: string }) => k.id)).toEqual([admin.id]);
  });

  it('returns the first response to a retry with the same key and body, and creates one key', async () => {
    const idem = randomUUID();
    const body = { label: 'retry-once', role: 'member', type_permissions: { 'core.*': 'read' } };
    const first = await post(body, idem);
    expect(first.status).toBe(201);
    expect(replayed(first)).toBe(false);

    // Same body with its keys in another order is the same request.
    const retry = await post({ type_permissions: { 'core.*': 'read' }, role: 'member', label: 'retry-once' }, idem);
    expect(retry.status).toBe(201);
    expect(retry.text).toBe(first.text);
    expect(retry.body.id).toBe(first.body.id);
    expect(retry.body.key).toBe(first.body.key);
    expect(replayed(retry)).toBe(true);
    expect(await keysLabelled('retry-once')).toBe(1);
  });

  it('refuses the same key with a different body with 409 conflict', async () => {
    const idem = randomUUID();
    await post({ label: 'conflict-a' }, idem).expect(201);
    const res = await post({ label: 'conflict-b' }, idem);
    expect(expectError(res, 409, 'conflict').details).toEqual({ idempotency_key: idem });
    expect(await keysLabelled('conflict-b')).toBe(0);
  });

  it('runs concurrent requests with one key once and gives them all the same response', async () => {
    const idem = randomUUID();
    const responses = await Promise.all(Array.from({ length: 5 }, () => post({ label: 'concurrent' }, idem)));
    for (const res of responses) {
      expect(res.status).toBe(201);
      expect(res.body).toEqual(responses[0].body);
    }
    expect(responses.filter((r) => !replayed(r))).toHaveLength(1);
    expect(await keysLabelled('concurrent')).toBe(1);
  });

  it('keeps and replays a validation_error', async () => {
    const idem = randomUUID();
    const first = await post({ label: 'invalid', role: 'boss' }, idem);
    expect(badFields(first)).toEqual(['role']);
    const retry = await post({ label: 'invalid', role: 'boss' }, idem);
    expect(retry.status).toBe(400);
    expect(retry.body).toEqual(first.body);
    expect(replayed(retry)).toBe(true);
  });

  it('keeps and replays a 409 duplicate_source even after the conflict is gone', async () => {
    const holder = await createKey(t, admin.key, { label: 'source holder', source: 'dup.source' });
    const idem = randomUUID();
    const body = { label: 'duplicate', source: 'dup.source' };
    const first = await post(body, idem);
    expectError(first, 409, 'duplicate_source');

    await t.http.delete(`/keys/${holder.id}`).set(bearer(admin.key)).expect(200);
    const retry = await post(body, idem);
    expectError(retry, 409, 'duplicate_source');
    expect(retry.body).toEqual(first.body);
    expect(replayed(retry)).toBe(true);
    expect(await keysLabelled('duplicate')).toBe(0);

    // A new key is a new request: the source is free now.
    await post(body, randomUUID()).expect(201);
    expect(await keysLabelled('duplicate')).toBe(1);
  });

  it('keeps keys per credential: two admins using one key string each get their own result', async () => {
    const second = await createKey(t, admin.key, { label: 'second admin', role: 'admin' });
    const idem = 'shared-key-string';
    const a = await post({ label: 'per-credential' }, idem, admin.key);
    const b = await post({ label: 'per-credential' }, idem, second.key);
    expect(a.status).toBe(201);
    expect(b.status).toBe(201);
    expect(replayed(a) || replayed(b)).toBe(false);
    expect(a.body.id).not.toBe(b.body.id);
    expect(await keysLabelled('per-credential')).toBe(2);
    const again = await post({ label: 'per-credential' }, idem, second.key);
    expect(again.body.id).toBe(b.body.id);
    expect(replayed(again)).toBe(true);
  });

  it('rejects a malformed Idempotency-Key header with 400 validation_error naming it', async () => {
    for (const bad of ['', 'has space', 'x'.repeat(256)]) {
      const res = await post({ label: 'bad-header' }, bad);
      expect(badFields(res)).toEqual([IDEM]);
    }
    expect(await keysLabelled('bad-header')).toBe(0);
    await post({ label: 'long-header' }, 'x'.repeat(255)).expect(201);
  });

  it('behaves normally without the header', async () => {
    const a = await post({ label: 'no-header' }).expect(201);
    const b = await post({ label: 'no-header' }).expect(201);
    expect(a.body.id).not.toBe(b.body.id);
    expect(replayed(a) || replayed(b)).toBe(false);
    expect(await keysLabelled('no-header')).toBe(2);
  });

  it('replays the Location of a 202 bulk job with its body', async () => {
    const idem = randomUUID();
    const start = () =>
      t.http.post('/items/bulk_action').set(bearer(admin.key)).set(IDEM, idem).send({ action: 'update_tier', tier: 'library', filter: { type: 'core.note' }, async: true }).expect(202);
    const first = await start();
    const again = await start();
    expect(replayed(again)).toBe(true);
    expect([again.headers.location, again.body]).toEqual([first.headers.location, first.body]);
    expect(first.headers.location).toBe(`/items/bulk_action/jobs/${first.body.id}`);
  });

  it('answers a retry whose kept response can no longer be opened 409 conflict with how the request ended, and runs nothing again', async () => {
    const idem = randomUUID();
    const start = () =>
      t.http.post('/items/bulk_action').set(bearer(admin.key)).set(IDEM, idem).send({ action: 'update_tier', tier: 'feed', filter: { type: 'core.note' }, async: true });
    const first = await start().expect(202);
    // As when the encryption key it was sealed under is gone: the sealed bytes no longer open.
    await t.sql(`UPDATE idempotency_keys SET response_body = set_byte(response_body, length(response_body) - 1, get_byte(response_body, length(response_body) - 1) # 1) WHERE key_hash = $1`, [
      keyDigest(idem),
    ]);
    // Every job row (an ended job keeps its row, though not its spec).
    const jobs = async () => (await t.sql(`SELECT id FROM bulk_jobs`)).length;
    const before = await jobs();
    const again = await start();
    expect(again.status).toBe(409);
    expect(again.body.error).toMatchObject({ code: 'conflict', details: { original_status: 202, location: first.headers.location } });
    expect(await jobs()).toBe(before);
  });

  it('leaves routes it does not decorate alone, even with a header', async () => {
    const created = await post({ label: 'undecorated' }).expect(201);
    // PATCH /keys/:id is not idempotent by key: both run, and the header is not checked.
    for (const label of ['renamed-1', 'renamed-2']) {
      const res = await t.http.patch(`/keys/${created.body.id}`).set(bearer(admin.key)).set(IDEM, 'has space').send({ label }).expect(200);
      expect(res.body.label).toBe(label);
      expect(replayed(res)).toBe(false);
    }
  });

  it('runs the request again once the key has expired', async () => {
    const idem = randomUUID();
    const first = await post({ label: 'expiring' }, idem).expect(201);
    const where = 'tenant_id = $1 AND credential_id = $2 AND key_hash = $3';
    const params = [admin.tenantId, admin.id, keyDigest(idem)];
    const [row] = await t.sql<{ ttl_hours: number }>(
      `SELECT extract(epoch FROM expires_at - created_at) / 3600 AS ttl_hours FROM idempotency_keys WHERE ${where}`,
      params,
    );
    expect(Number(row.ttl_hours)).toBeCloseTo(24, 3);

    await t.sql(`UPDATE idempotency_keys SET expires_at = now() - interval '1 second' WHERE ${where}`, params);
    const again = await post({ label: 'expiring' }, idem);
    expect(again.status).toBe(201);
    expect(again.body.id).not.toBe(first.body.id);
    expect(replayed(again)).toBe(false);
    expect(await keysLabelled('expiring')).toBe(2);
    const rows = await t.sql(`SELECT 1 FROM idempotency_keys WHERE ${where}`, params);
    expect(rows).toHaveLength(1);
  });

  it('sweeps expired rows away and leaves live ones', async () => {
    const live = randomUUID();
    const old = randomUUID();
    await post({ label: 'sweep-live' }, live).expect(201);
    await post({ label: 'sweep-old' }, old).expect(201);
    await t.sql(`UPDATE idempotency_keys SET expires_at = now() - interval '1 minute' WHERE key_hash = $1`, [keyDigest(old)]);
    expect(await t.app.get(IdempotencyJanitor).sweep()).toBeGreaterThanOrEqual(1);
    const left = await t.sql<{ key_hash: string }>('SELECT key_hash FROM idempotency_keys WHERE key_hash = ANY($1)', [
      [keyDigest(live), keyDigest(old)],
    ]);
    expect(left.map((r) => r.key_hash)).toEqual([keyDigest(live)]);
  });

  it('a pass clears the whole backlog of expired rows, however large', async () => {
    await t.sql(
      `INSERT INTO idempotency_keys (tenant_id, credential_id, key_hash, fingerprint, state, expires_at)
       SELECT $1, 'backlog', g::text, '', 'in_progress', now() - interval '1 minute' FROM generate_series(1, 101000) g`,
      [randomUUID()],
    );
    expect(await t.app.get(IdempotencyJanitor).sweep()).toBeGreaterThanOrEqual(101000);
    expect(await t.sql(`SELECT 1 FROM idempotency_keys WHERE credential_id = 'backlog' LIMIT 1`)).toEqual([]);
  });

  it('stores neither the key string nor the response in readable form', async () => {
    const idem = `readable-${randomUUID()}`;
    const res = await post({ label: 'sealed' }, idem).expect(201);
    const rows = await t.sql<{ n: string }>(
      `SELECT count(*) AS n FROM idempotency_keys
        WHERE key_hash = $1 OR position(convert_to($2, 'UTF8') IN response_body) > 0 OR position(convert_to($3, 'UTF8') IN response_body) > 0`,
      [idem, res.body.key, res.body.id],
    );
    expect(Number(rows[0].n)).toBe(0);
  });

  it('documents the header on the decorated route', async () => {
    const doc = await t.http.get('/openapi.json').expect(200);
    const params: Array<{ name: string; in: string }> = doc.body.paths['/keys'].post.parameters ?? [];
    expect(params).toContainEqual(expect.objectContaining({ name: IDEM, in: 'header', required: false }));
    expect(doc.body.paths['/keys'].get.parameters ?? []).not.toContainEqual(expect.objectContaining({ name: IDEM }));
  });

  describe('a retry that finds the key in progress', () => {
    const stage = async (idem: string, body: object, age = '0 seconds') => {
      await t.sql(
        `INSERT INTO idempotency_keys (tenant_id, credential_id, key_hash, fingerprint, state, created_at, expires_at)
         VALUES ($1, $2, $3, $4, 'in_progress', now() - $5::interval, now() + interval '1 hour')`,
        [admin.tenantId, admin.id, keyDigest(idem), requestFingerprint('POST', '/keys', body), age],
      );
    };
    const where = 'tenant_id = $1 AND credential_id = $2 AND key_hash = $3';
    /** Sends the request, and resolves once it has found the key in progress (it is waiting), to its answer's promise. */
    const postWaiting = async (body: object, idem: string) => {
      const found = jest.spyOn(t.app.get(IdempotencyStore), 'find');
      try {
        const pending = post(body, idem).then((r) => r);
        await waitFor(() => found.mock.calls.some(([, digest]) => digest === keyDigest(idem)), 'the request waiting for the key');
        return { pending };
      } finally {
        found.mockRestore();
      }
    };

    it('waits for it to complete and replays its response', async () => {
      const idem = randomUUID();
      const body = { label: 'waiting' };
      await stage(idem, body);
      const { pending } = await postWaiting(body, idem);
      const digest = keyDigest(idem);
      const sealed = await t.app.get(ResponseSeal).seal(idem, { tenantId: admin.tenantId, credentialId: admin.id }, digest, 201, '{"done":true}');
      await t.sql(`UPDATE idempotency_keys SET state = 'completed', response_status = 201, response_body = $4 WHERE ${where}`, [
        admin.tenantId,
        admin.id,
        digest,
        sealed,
      ]);
      const res = await pending;
      expect(res.status).toBe(201);
      expect(res.body).toEqual({ done: true });
      expect(replayed(res)).toBe(true);
      expect(await keysLabelled('waiting')).toBe(0);
    });

    it('runs the request itself when the other one gives the key up', async () => {
      const idem = randomUUID();
      const body = { label: 'released' };
      await stage(idem, body);
      const { pending } = await postWaiting(body, idem);
      await t.sql(`DELETE FROM idempotency_keys WHERE ${where}`, [admin.tenantId, admin.id, keyDigest(idem)]);
      const res = await pending;
      expect(res.status).toBe(201);
      expect(replayed(res)).toBe(false);
      expect(await keysLabelled('released')).toBe(1);
    });

    it('takes over a claim whose lease lapsed, however recently it was made (its request is gone)', async () => {
      const idem = randomUUID();
      const body = { label: 'lapsed' };
      await stage(idem, body);
      await t.sql(`UPDATE idempotency_keys SET lease_until = now() - interval '1 second' WHERE ${where}`, [admin.tenantId, admin.id, keyDigest(idem)]);
      const res = await post(body, idem);
      expect([res.status, replayed(res)]).toEqual([201, false]);
      expect(await keysLabelled('lapsed')).toBe(1);
    });

    it('takes over a claim made without a lease (by an instance not yet upgraded) 5 minutes after it', async () => {
      const idem = randomUUID();
      const body = { label: 'abandoned' };
      await stage(idem, body, '1 hour');
      const res = await post(body, idem);
      expect(res.status).toBe(201);
      expect(replayed(res)).toBe(false);
      expect(await keysLabelled('abandoned')).toBe(1);
    });

    it('never runs again work whose response was not kept: its transaction marked the key applied', async () => {
      const idem = randomUUID();
      const body = { label: 'applied' };
      const key = [admin.tenantId, admin.id, keyDigest(idem)];
      // The response cannot be kept, as when the instance dies right after the work committed.
      await t.sql(`CREATE FUNCTION refuse_completion() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RAISE EXCEPTION 'not now'; END $$`);
      await t.sql(`CREATE TRIGGER refuse_completion BEFORE UPDATE ON idempotency_keys FOR EACH ROW WHEN (NEW.state = 'completed') EXECUTE FUNCTION refuse_completion()`);
      try {
        expect((await post(body, idem)).status).toBe(201);
      } finally {
        await t.sql(`DROP TRIGGER refuse_completion ON idempotency_keys`);
        await t.sql(`DROP FUNCTION refuse_completion()`);
      }
      expect(await t.sql(`SELECT state FROM idempotency_keys WHERE ${where}`, key)).toEqual([{ state: 'applied' }]);
      // Past the claim's lease, the retry is refused, not run again.
      await t.sql(`UPDATE idempotency_keys SET lease_until = now() - interval '1 second' WHERE ${where}`, key);
      const retry = await post(body, idem);
      expectError(retry, 409, 'conflict');
      expect(retry.body.error.message).toMatch(/applied/);
      expect(await keysLabelled('applied')).toBe(1);
    });

    it('refuses a different body at once', async () => {
      const idem = randomUUID();
      await stage(idem, { label: 'first body' });
      expectError(await post({ label: 'second body' }, idem), 409, 'conflict');
    });
  });

  describe('a request that runs longer than the lease', () => {
    let short: TestApp;
    let holder: Client;
    let key: string;
    beforeAll(async () => {
      short = await startApp({ IDEMPOTENCY_LEASE_SECONDS: '2' });
      key = (await bootstrapAdmin(short)).key;
      holder = new Client({ connectionString: short.databaseUrl });
      await holder.connect();
    });
    afterAll(async () => {
      await holder?.end();
      await short?.close();
    });

    const send = (idem: string) => short.http.post('/keys').set(bearer(key)).set(IDEM, idem).send({ label: idem }).then((r) => r);
    const claimOf = (idem: string) => `key_hash = '${keyDigest(idem)}'`;
    /** Holds every insert into api_keys (the work of POST /keys) until the returned function is called. */
    const holdKeyWrites = async () => {
      await holder.query('BEGIN');
      await holder.query('LOCK TABLE api_keys IN SHARE ROW EXCLUSIVE MODE');
      return () => holder.query('COMMIT');
    };
    const waitingForTheLock = () =>
      waitFor(async () => (await short.sql(`SELECT 1 FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'`)).length > 0, 'the request waiting');

    it('keeps its claim alive: a retry long after waits for it and replays its answer', async () => {
      const release = await holdKeyWrites();
      const first = send('renewed');
      await waitingForTheLock();
      // Two and a half leases after the claim, its lease is still ahead: the request renewed it.
      await waitFor(async () => (await short.sql(`SELECT 1 FROM idempotency_keys WHERE ${claimOf('renewed')} AND created_at < now() - interval '5 seconds'`)).length > 0, 'the claim older than its lease', 10_000, 200);
      expect(await short.sql(`SELECT 1 FROM idempotency_keys WHERE ${claimOf('renewed')} AND lease_until > now()`)).toHaveLength(1);
      const found = jest.spyOn(short.app.get(IdempotencyStore), 'find');
      const retry = send('renewed');
      await waitFor(() => found.mock.calls.some(([, digest]) => digest === keyDigest('renewed')), 'the retry waiting for the claim');
      found.mockRestore();
      await release();
      const [a, b] = await Promise.all([first, retry]);
      expect([a.status, replayed(a), b.status, replayed(b), b.body.id]).toEqual([201, false, 201, true, a.body.id]);
    });

    it('commits nothing once a retry took its claim over: it answers 409 conflict and creates nothing', async () => {
      const release = await holdKeyWrites();
      const first = send('taken-over');
      await waitingForTheLock();
      // What a retry's claim does once the lease lapsed (the request could not renew it: its database was away).
      await short.sql(`UPDATE idempotency_keys SET created_at = clock_timestamp(), lease_until = clock_timestamp() + interval '1 hour' WHERE ${claimOf('taken-over')}`);
      await release();
      expectError(await first, 409, 'conflict');
      expect(await short.sql(`SELECT 1 FROM api_keys WHERE label = 'taken-over'`)).toHaveLength(0);
    });
  });
});
