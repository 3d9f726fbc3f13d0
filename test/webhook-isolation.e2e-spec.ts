/**
 * Webhooks whose receivers fail do not hold up another webhook's first attempts or their
 * records: retries, their claims and records and the sweeper's passes run on connections of
 * their own (bookkeeping-db.ts), which the relay and first attempts never wait for.
 */
import { Client } from 'pg';
import { BOOKKEEPING_APP, LATER_POOL_SIZE } from '../src/database/bookkeeping-db';
import { bearer, bootstrapAdmin, createTenant, startApp, TestApp } from './support/app';
import { Receiver } from './support/receiver';
import { waitFor } from './support/wait';

describe('webhook isolation: failing webhooks\' retries and a healthy webhook\'s first attempts (e2e)', () => {
  const receiver = new Receiver();
  let t: TestApp;
  let admin: string;
  let base: string;

  beforeAll(async () => {
    base = await receiver.start();
    t = await startApp({ WEBHOOK_TIMEOUT_MS: '2000', WEBHOOK_RETRY_SCHEDULE: Array(10).fill('1s').join(','), WEBHOOK_SWEEP_INTERVAL: '500ms' });
    admin = (await bootstrapAdmin(t)).key;
  });
  afterAll(async () => {
    await t?.close();
    await receiver.stop();
  });

  const registerAt = async (key: string, path: string) =>
    (await t.http.post('/webhooks').set(bearer(key)).send({ url: `${base}${path}`, events: ['item.created'] }).expect(201)).body.id as string;
  const note = async (key: string, title: string) =>
    (await t.http.post('/items').set(bearer(key)).send({ type: 'core.note', properties: { title } }).expect(201)).body.id as string;
  const bulkNotes = async (key: string, n: number) =>
    t.http
      .post('/items/bulk')
      .set(bearer(key))
      .send({ mode: 'create_only', items: Array.from({ length: n }, (_, i) => ({ type: 'core.note', properties: { title: `failing ${i}` } })) })
      .expect(200);
  /** The healthy webhook's deliveries as its owner lists them: the record of each first attempt. */
  const listed = async (hookId: string) =>
    ((await t.http.get(`/webhooks/${hookId}/deliveries?limit=100`).set(bearer(admin)).expect(200)).body.deliveries as Array<{ status: string }>).filter(
      (d) => d.status === 'succeeded',
    ).length;
  /** Sessions of this test's database by application_name, and how many of them wait for a lock. */
  const sessions = async () =>
    t.sql<{ app: string; n: number; locked: number }>(
      `SELECT application_name AS app, count(*)::int AS n, count(*) FILTER (WHERE wait_event_type = 'Lock')::int AS locked
         FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid() GROUP BY 1`,
    );

  it('delivers and records a healthy webhook\'s items one after another while 20 webhooks of another tenant answer 500 and retry', async () => {
    const failing = await createTenant(t, admin, 'failing receivers');
    const paths = Array.from({ length: 20 }, (_, i) => `/storm-failing-${i}`);
    for (const path of paths) await registerAt(failing.key, path);
    const healthy = await registerAt(admin, '/storm-healthy');
    receiver.respond = (r) => (r.path.startsWith('/storm-failing-') ? 500 : 200);
    const failed = () => paths.reduce((n, path) => n + receiver.at(path).length, 0);

    await bulkNotes(failing.key, 20);
    // 400 first attempts answered 500, and the retries under way (each delivery is retried ten times, a second apart):
    // how soon depends on the machine's load (a CI run with other files in parallel took over 30 s to 800), not on isolation.
    await waitFor(() => failed() >= 440, 'the failing webhooks\' retries under way', 60_000);
    const before = failed();
    for (let i = 1; i <= 15; i++) {
      const id = await note(admin, `healthy ${i}`);
      await waitFor(() => receiver.at('/storm-healthy').some((r) => JSON.parse(r.body).item.id === id), `the healthy webhook's delivery ${i}`);
      await waitFor(async () => (await listed(healthy)) === i, `the healthy webhook's delivery ${i} recorded`);
    }
    // All of that while the failing webhooks were still retrying.
    expect(failed()).toBeGreaterThan(before);
  }, 90_000);

  it('keeps first attempts and their records going while every retry\'s claim is stuck: retries hold only their own connections', async () => {
    const stuck = await createTenant(t, admin, 'stuck retries');
    const paths = Array.from({ length: 10 }, (_, i) => `/stuck-failing-${i}`);
    for (const path of paths) await registerAt(stuck.key, path);
    const healthy = await registerAt(admin, '/stuck-healthy');
    receiver.respond = (r) => (r.path.startsWith('/stuck-failing-') ? 500 : 200);
    await bulkNotes(stuck.key, 10);
    // Every first attempt recorded (its outcome written, its lease cleared): what follows are retries.
    await waitFor(
      async () =>
        Number(
          (await t.sql<{ n: string }>(`SELECT count(*) AS n FROM webhook_deliveries WHERE tenant_id = $1 AND attempts >= 1 AND lease_until IS NULL`, [stuck.tenantId]))[0].n,
        ) === 100,
      'the failing first attempts recorded',
    );

    // The failing deliveries' rows locked: each retry's claim waits on its connection, as it would on a slow database.
    const locker = new Client({ connectionString: t.databaseUrl });
    await locker.connect();
    try {
      await locker.query('BEGIN');
      await locker.query(`SELECT id FROM webhook_deliveries WHERE tenant_id = $1 FOR UPDATE`, [stuck.tenantId]);
      const blocked = await waitFor(async () => {
        const s = await sessions();
        return s.reduce((n, r) => n + r.locked, 0) >= LATER_POOL_SIZE && s;
      }, 'retries\' claims waiting on the locked rows');
      // Only the later attempts' sessions wait, and there are no more of them than their share.
      expect(blocked.filter((r) => r.locked > 0).map((r) => r.app)).toEqual([BOOKKEEPING_APP.later]);
      expect(blocked.find((r) => r.app === BOOKKEEPING_APP.later)!.n).toBeLessThanOrEqual(LATER_POOL_SIZE);

      for (let i = 1; i <= 3; i++) {
        const id = await note(admin, `while stuck ${i}`);
        await waitFor(() => receiver.at('/stuck-healthy').some((r) => JSON.parse(r.body).item.id === id), `the healthy webhook's delivery ${i}`);
        await waitFor(async () => (await listed(healthy)) === i, `the healthy webhook's delivery ${i} recorded`);
      }
      // The retries were still stuck all along.
      expect((await sessions()).filter((r) => r.locked > 0).map((r) => r.app)).toEqual([BOOKKEEPING_APP.later]);
    } finally {
      await locker.query('ROLLBACK');
      await locker.end();
    }
    // Released, the retries go on: a claim that could not get a connection meanwhile was left to the sweeper.
    await waitFor(
      async () =>
        Number((await t.sql<{ n: string }>(`SELECT count(*) AS n FROM webhook_deliveries WHERE tenant_id = $1 AND attempts >= 2`, [stuck.tenantId]))[0].n) === 100,
      'every failing delivery retried after the release',
      30_000,
    );
  });
});
