/**
 * An event stream that cannot deliver what it owes ends, so that its client resumes with
 * Last-Event-ID and the replay fills the gap, rather than going on past events it skipped: a live
 * batch whose sending failed (the type catalogue could not be read), and a Last-Event-ID replay
 * that failed the same way. The failure is real: the test holds the item types' table locked,
 * and cancels the catalogue read that waits for it.
 */
import { Client } from 'pg';
import { DataSource } from 'typeorm';
import type { Principal } from '../src/auth/principal';
import { Outbox } from '../src/events/outbox';
import { bearer, bootstrapAdmin, createKey, createTenant, startApp, TestApp } from './support/app';
import { SseClient } from './support/sse';
import { waitFor } from './support/wait';

describe('event stream gaps (e2e)', () => {
  let a: TestApp;
  let admin: string;
  const streams: SseClient[] = [];
  const clients: Client[] = [];

  const open = async (key: string, headers: Record<string, string> = {}) => {
    const s = await SseClient.open(`${a.url}/events`, { ...bearer(key), ...headers });
    streams.push(s);
    expect(s.status).toBe(200);
    return s;
  };
  const note = (key: string, title: string) => a.http.post('/items').set(bearer(key)).send({ type: 'core.note', properties: { title } }).expect(201);
  const titles = (s: SseClient) => s.named().filter((e) => e.body.item).map((e) => e.body.item.properties.title);
  const connected = async () => {
    const c = new Client({ connectionString: a.databaseUrl });
    c.on('error', () => undefined);
    await c.connect();
    clients.push(c);
    return c;
  };
  /** A type added: the tenant's cached catalogue is dropped, so the next event sent reads it from the database. */
  const typeAdded = (key: string, name: string) => a.http.post('/types').set(bearer(key)).send({ name, schema: { type: 'object' } }).expect(201);
  /** Holds the item types' table locked (from the moment this resolves until the returned client rolls back). */
  const lockTypes = async () => {
    const locker = await connected();
    await locker.query('BEGIN');
    await locker.query('LOCK TABLE item_types IN ACCESS EXCLUSIVE MODE');
    return locker;
  };
  /** Catalogue reads waiting for the lock (those started after `since`, when given). */
  const catalogueReads = (since = '-infinity') =>
    a.sql<{ pid: number; started: string }>(
      `SELECT pid, query_start::text AS started FROM pg_stat_activity
        WHERE datname = current_database() AND wait_event_type = 'Lock' AND query LIKE 'SELECT name, parent FROM item_types%' AND query_start > $1::timestamptz`,
      [since],
    );
  /** The catalogue read waiting for the lock fails (cancelled; its session stays): when it started. */
  const failCatalogueRead = async () => {
    const [{ pid, started }] = await waitFor(async () => {
      const rows = await catalogueReads();
      return rows.length ? rows : undefined;
    }, 'the catalogue read waiting for the lock');
    await a.sql('SELECT pg_cancel_backend($1)', [pid]);
    return started;
  };
  const published = async (titlesOf: string[]) =>
    waitFor(
      async () =>
        (await a.sql(`SELECT 1 FROM events WHERE payload->'item'->'properties'->>'title' = ANY($1::text[]) AND published_seq IS NOT NULL`, [titlesOf])).length ===
        titlesOf.length,
      `${titlesOf.join(', ')} published`,
    );

  beforeAll(async () => {
    a = await startApp({ EVENTS_HEARTBEAT_SECONDS: '1' });
    admin = (await bootstrapAdmin(a)).key;
  });
  afterAll(async () => {
    streams.forEach((s) => s.close());
    await Promise.all(clients.map((c) => c.end().catch(() => undefined)));
    await a?.close();
  });

  it('ends a live stream whose batch could not be sent, and the resume with its Last-Event-ID gets every event once', async () => {
    const tenant = await createTenant(a, admin, 'gap-live');
    const s = await open(tenant.key);
    const first = (await note(tenant.key, 'live 1')).body;
    await waitFor(() => titles(s).includes('live 1'), 'live 1');
    const lastId = s.named().at(-1)!.id!;
    await typeAdded(tenant.key, 'acme.gap_live');

    // The event is written while the types are readable (the outbox reads them), and committed
    // once the lock is asked for: the stream's catalogue read comes after the lock, and waits.
    const [row] = await a.sql<{ audience: any; payload: any; credential_id: string }>(`SELECT audience, payload, credential_id FROM events WHERE payload->'item'->>'id' = $1`, [first.id]);
    const payload = { ...row.payload, item: { ...row.payload.item, properties: { title: 'live 2' } } };
    const writer = a.app.get(DataSource).createQueryRunner();
    await writer.startTransaction();
    let locker: Client | undefined;
    try {
      await a.app.get(Outbox).record(writer.manager, { tenantId: tenant.tenantId, credentialId: row.credential_id } as Principal, 'item.updated', row.audience, payload);
      const lockPending = lockTypes();
      await waitFor(async () => (await a.sql(`SELECT 1 FROM pg_locks WHERE locktype = 'relation' AND relation = 'item_types'::regclass AND NOT granted`)).length > 0, 'the lock asked for');
      await writer.commitTransaction();
      locker = await lockPending;
      await failCatalogueRead();
    } finally {
      if (writer.isTransactionActive) await writer.rollbackTransaction();
      await writer.release();
      await locker?.query('ROLLBACK');
    }

    // Going on would skip "live 2" without the client knowing: the stream ends instead.
    await note(tenant.key, 'live 3');
    await waitFor(() => s.closed || titles(s).includes('live 3'), 'the stream to end (or skip ahead)');
    expect({ closed: s.closed, titles: titles(s) }).toEqual({ closed: true, titles: ['live 1'] });

    const resumed = await open(tenant.key, { 'Last-Event-ID': lastId });
    await note(tenant.key, 'live 4');
    await waitFor(() => titles(resumed).includes('live 4'), 'live 4 on the resumed stream');
    expect(titles(resumed)).toEqual(['live 2', 'live 3', 'live 4']);
    resumed.close();
  });

  it('ends a stream whose Last-Event-ID replay failed, sending nothing past what it did not replay', async () => {
    const tenant = await createTenant(a, admin, 'gap-replay');
    const other = await createTenant(a, admin, 'gap-marker');
    const watching = await open(other.key);
    const template = (await note(other.key, 'template')).body;
    await waitFor(() => titles(watching).includes('template'), 'the other tenant\'s stream live');
    const reader = await createKey(a, tenant.key, { label: 'replay reader', type_permissions: { '*': 'read' } });
    const before = await open(reader.key);
    await note(tenant.key, 'replay 1');
    await waitFor(() => titles(before).includes('replay 1'), 'replay 1');
    const lastId = before.named().at(-1)!.id!;
    before.close();
    await note(tenant.key, 'replay 2');
    await note(tenant.key, 'replay 3');
    await published(['replay 2', 'replay 3']);
    await typeAdded(tenant.key, 'acme.gap_replay');

    // While the resumed stream's replay waits for the types, "replay 4" is published (held for
    // it), then the other tenant's marker, whose arrival there says "replay 4" was handed over;
    // once the replay has failed, "replay 4b" likewise. The writers read the types before the lock
    // is asked for, and commit while it waits: what comes after the lock in its queue waits.
    const [row] = await a.sql<{ audience: any; payload: any; credential_id: string }>(`SELECT audience, payload, credential_id FROM events WHERE payload->'item'->>'id' = $1`, [template.id]);
    const writes = [
      [tenant.tenantId, 'replay 4'],
      [other.tenantId, 'marker 1'],
      [tenant.tenantId, 'replay 4b'],
      [other.tenantId, 'marker 2'],
    ];
    const writers = writes.map(() => a.app.get(DataSource).createQueryRunner());
    let locker: Client | undefined;
    let keysLocker: Client | undefined;
    let s: SseClient;
    try {
      for (const [n, [tenantId, title]] of writes.entries()) {
        await writers[n].startTransaction();
        const payload = { ...row.payload, item: { ...row.payload.item, properties: { title } } };
        await a.app.get(Outbox).record(writers[n].manager, { tenantId, credentialId: row.credential_id } as Principal, 'item.updated', row.audience, payload);
      }
      const lockPending = lockTypes();
      await waitFor(async () => (await a.sql(`SELECT 1 FROM pg_locks WHERE locktype = 'relation' AND relation = 'item_types'::regclass AND NOT granted`)).length > 0, 'the lock asked for');
      s = await open(reader.key, { 'Last-Event-ID': lastId });
      await waitFor(async () => (await catalogueReads()).length > 0, 'the replay waiting for the types');
      await writers[0].commitTransaction();
      await published(['replay 4']);
      await writers[1].commitTransaction();
      await waitFor(() => titles(watching).includes('marker 1'), 'marker 1 live');
      const failed = await failCatalogueRead();
      // Whatever the stream does next with the types waits, unless it has ended.
      await waitFor(async () => s.closed || (await catalogueReads(failed)).length > 0, 'the stream to end, or to read the types again');
      await writers[2].commitTransaction();
      await published(['replay 4b']);
      await writers[3].commitTransaction();
      locker = await lockPending;
      await waitFor(() => titles(watching).includes('marker 2'), 'marker 2 live');
      // Its key changed, then the keys locked: a stream still sending would look its key up again
      // after "replay 4", and wait there, so that what it sent reaches its client before anything else.
      await a.http.patch(`/keys/${reader.id}`).set(bearer(tenant.key)).send({ label: 'replay reader, relabelled' }).expect(200);
      keysLocker = await connected();
      await keysLocker.query('BEGIN');
      await keysLocker.query('LOCK TABLE api_keys IN ACCESS EXCLUSIVE MODE');
      await locker.query('ROLLBACK');
      locker = undefined;
      await waitFor(() => s.closed || titles(s).length > 0, 'the stream to end (or to send past what it did not replay)');
    } finally {
      for (const w of writers) {
        if (w.isTransactionActive) await w.rollbackTransaction();
        await w.release();
      }
      await locker?.query('ROLLBACK');
      await keysLocker?.query('ROLLBACK');
    }
    expect({ closed: s.closed, titles: titles(s) }).toEqual({ closed: true, titles: [] });
    await note(tenant.key, 'replay 5');

    // The client resumes after the last event it got: together, every event once.
    const resumed = await open(reader.key, { 'Last-Event-ID': s.named().at(-1)?.id ?? lastId });
    await note(tenant.key, 'replay 6');
    await waitFor(() => titles(resumed).includes('replay 6'), 'replay 6 on the resumed stream');
    expect([...titles(s), ...titles(resumed)]).toEqual(['replay 2', 'replay 3', 'replay 4', 'replay 4b', 'replay 5', 'replay 6']);
    resumed.close();
  });
});
