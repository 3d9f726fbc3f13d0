/**
 * The webhook sweeper against a real receiver: one webhook's backlog of due deliveries, larger
 * than a pass takes and held by a receiver that does not answer, does not keep the sweeper from
 * the due deliveries of other webhooks, of its tenant or another, whose receivers have recovered;
 * a backlog larger than a line goes at the receiver's pace; and a webhook enabled again gets the
 * deliveries that came due while it was disabled at once, not at the sweeper's interval.
 */
import Redis from 'ioredis';
import { Client } from 'pg';
import { bearer, bootstrapAdmin, clearRedisPrefix, createTenant, REDIS_URL, startApp, TestApp } from './support/app';
import { Receiver } from './support/receiver';
import { waitFor } from './support/wait';
import { PlanNode, rowsRead } from './support/plans';
import { BookkeepingDb } from '../src/database/bookkeeping-db';
import { CLAIM, MAX_WAITING_PER_WEBHOOK, WebhookDispatcher } from '../src/webhooks/webhook-dispatcher';
import { BATCH, DUE_IN_TURNS, WebhookSweeper } from '../src/webhooks/webhook-sweeper';

describe('the webhook sweeper, while one webhook has more due deliveries than a pass takes', () => {
  let t: TestApp;
  let receiver: Receiver;
  let base: string;
  let admin: string;
  let release: (status: number) => void = () => undefined;

  beforeAll(async () => {
    receiver = new Receiver();
    base = await receiver.start();
    // Attempts to the dead receiver never end while the test runs: its deliveries stay due, or leased.
    t = await startApp({ WEBHOOK_SWEEP_INTERVAL: '200ms', WEBHOOK_RETRY_SCHEDULE: '2s,2s', WEBHOOK_TIMEOUT_MS: '60000' });
    admin = (await bootstrapAdmin(t)).key;
  });
  afterAll(async () => {
    release(200);
    await t.close();
    await receiver.stop();
  });

  const register = async (key: string, path: string, body: Record<string, unknown>) =>
    (await t.http.post('/webhooks').set(bearer(key)).send({ url: `${base}${path}`, ...body }).expect(201)).body as { id: string };
  const note = async (key: string) =>
    (await t.http.post('/items').set(bearer(key)).send({ type: 'core.note', properties: { title: 'n' } }).expect(201)).body as { id: string };
  const deliveries = (webhookId: string) =>
    t.sql<{ id: string; status: string; attempts: number }>(`SELECT id, status, attempts FROM webhook_deliveries WHERE webhook_id = $1`, [webhookId]);

  it('sends the due deliveries of webhooks whose receivers recovered, of the same tenant and another', async () => {
    const held = new Promise<number>((resolve) => (release = resolve));
    const down = new Set(['/same-tenant', '/other-tenant']);
    receiver.respond = (r) => (r.path === '/dead' ? held : down.has(r.path) ? 500 : 200);

    // The dead receiver's webhook: one real delivery, then 1,200 more of its event, due for an hour.
    const dead = await register(admin, '/dead', { events: ['item.created'], type_filter: ['core.note'] });
    const sameTenant = await register(admin, '/same-tenant', { events: ['item.updated'] });
    const other = await createTenant(t, admin, 'swept');
    const otherTenant = await register(other.key, '/other-tenant', { events: ['item.created'] });
    await note(admin);
    const [first] = await waitFor(async () => {
      const rows = await deliveries(dead.id);
      return rows.length === 1 && rows;
    }, 'the dead receiver\'s first delivery listed');
    await t.sql(
      `INSERT INTO webhook_deliveries (tenant_id, id, webhook_id, event_id, event, status, attempts, next_attempt_at)
       SELECT tenant_id, gen_random_uuid(), webhook_id, event_id, event, 'pending', 1, now() - interval '1 hour' + g * interval '1 millisecond'
         FROM webhook_deliveries, generate_series(1, 1200) g WHERE id = $1`,
      [first.id],
    );
    await waitFor(() => receiver.at('/dead').length >= 16, 'the dead receiver holding its attempts');

    // The other two webhooks' first attempts fail; Redis then loses their retries, and their receivers recover.
    const item = await note(admin);
    await t.http.patch(`/items/${item.id}`).set(bearer(admin)).send({ version: 1, properties: { title: 'edited' } }).expect(200);
    await note(other.key);
    const failed = await waitFor(async () => {
      const rows = [...(await deliveries(sameTenant.id)), ...(await deliveries(otherTenant.id))];
      return rows.length === 2 && rows.every((d) => d.attempts === 1) && rows;
    }, 'both first attempts failed');
    // Cleared once both retries are queued, so that neither is queued after the loss.
    const redis = new Redis(REDIS_URL);
    try {
      const queued = (d: { id: string }) => redis.exists(`${t.config.REDIS_PREFIX}bull:webhooks:${d.id}:1`);
      await waitFor(async () => (await Promise.all(failed.map(queued))).every((n) => n === 1), 'both retries queued');
    } finally {
      redis.disconnect();
    }
    await clearRedisPrefix(t.config.REDIS_PREFIX);
    down.clear();

    await waitFor(async () => {
      const rows = [...(await deliveries(sameTenant.id)), ...(await deliveries(otherTenant.id))];
      return rows.every((d) => d.status === 'succeeded');
    }, 'both deliveries sent by the sweeper');
    expect([receiver.at('/same-tenant').length, receiver.at('/other-tenant').length]).toEqual([2, 2]);
    // All the while the dead receiver's backlog was there, more than a pass's worth of it due.
    const [{ due }] = await t.sql<{ due: number }>(
      `SELECT count(*)::int AS due FROM webhook_deliveries WHERE webhook_id = $1 AND status = 'pending' AND next_attempt_at <= now()`,
      [dead.id],
    );
    expect(due).toBeGreaterThan(1000);
    // A claim reads its one row whatever the statistics; here there are none (never analysed).
    const [pending] = await t.sql<{ tenant_id: string; id: string }>(
      `SELECT tenant_id, id FROM webhook_deliveries WHERE webhook_id = $1 AND status = 'pending' AND lease_until IS NULL ORDER BY next_attempt_at DESC LIMIT 1`,
      [dead.id],
    );
    const claimer = new Client({ connectionString: t.databaseUrl });
    await claimer.connect();
    try {
      await claimer.query('BEGIN');
      const { rows: [{ 'QUERY PLAN': [claim] }] } = await claimer.query(`EXPLAIN (ANALYZE, FORMAT JSON) ${CLAIM}`, [pending.tenant_id, pending.id, 1000, false, null, false]);
      expect(rowsRead(claim.Plan, 'webhook_deliveries')).toBeLessThanOrEqual(3); // the row found, read and updated
    } finally {
      await claimer.query('ROLLBACK');
      await claimer.end();
    }
    // A pass reads the head of each webhook's due deliveries, not all of them (migration 4300):
    // through the sweeper's own pool, with the statistics autovacuum would have gathered (this
    // machine runs without it).
    await t.sql(`ANALYZE webhook_deliveries`);
    const [{ 'QUERY PLAN': [plan] }] = await t.app
      .get(BookkeepingDb)
      .later<{ 'QUERY PLAN': [{ Plan: PlanNode }] }>(`EXPLAIN (ANALYZE, FORMAT JSON) ${DUE_IN_TURNS}`, [200, [], [], []]);
    expect(rowsRead(plan.Plan, 'webhook_deliveries')).toBeLessThan(BATCH + 100);

    await t.http.delete(`/webhooks/${dead.id}`).set(bearer(admin)).expect(200);
  });
});

describe('the webhook sweeper, while a healthy receiver\'s backlog is larger than its line', () => {
  let t: TestApp;
  let receiver: Receiver;
  let base: string;
  let admin: string;

  beforeAll(async () => {
    receiver = new Receiver();
    base = await receiver.start();
    // No pass comes from the interval while the test runs (the longest one there is): waiting for one would time it out.
    // Nor does one come from attempts that time out (a line that refused getting room again).
    t = await startApp({ WEBHOOK_SWEEP_INTERVAL: '60m', WEBHOOK_TIMEOUT_MS: '120000' });
    admin = (await bootstrapAdmin(t)).key;
  });
  afterAll(async () => {
    await t.close();
    await receiver.stop();
  });

  it('sends it all at the receiver\'s pace, each pass asked for when the line has room, not at the interval, beside a webhook whose line stays full', async () => {
    // Held until more deliveries are left in the table than the line holds, then answered at once.
    let release: (status: number) => void = () => undefined;
    const held = new Promise<number>((resolve) => (release = resolve));
    let open = false;
    // The other webhook's receiver never answers: its line stays full, and refuses the turns a pass gives it.
    receiver.respond = (r) => (r.path === '/hung' ? 'hang' : open ? 200 : held);
    const webhook = (await t.http.post('/webhooks').set(bearer(admin)).send({ url: `${base}/bulk`, events: ['*'] }).expect(201)).body as { id: string };
    await t.http.post('/webhooks').set(bearer(admin)).send({ url: `${base}/hung`, events: ['*'] }).expect(201);

    const total = 3 * MAX_WAITING_PER_WEBHOOK;
    for (let at = 0; at < total; at += 1000) {
      const items = Array.from({ length: 1000 }, (_, n) => ({ type: 'core.note', properties: { title: `bulk ${at + n}` } }));
      await t.http.post('/items/bulk').set(bearer(admin)).send({ mode: 'create_only', items }).expect(200);
    }
    const leftForSweeper = async () =>
      (
        await t.sql<{ n: number }>(
          `SELECT count(*)::int AS n FROM webhook_deliveries WHERE webhook_id = $1 AND status = 'pending' AND attempts = 0 AND lease_until IS NULL`,
          [webhook.id],
        )
      )[0].n;
    await waitFor(async () => (await leftForSweeper()) > MAX_WAITING_PER_WEBHOOK, 'more deliveries left in the table than the line holds');
    // Passes are counted: a line that refused must not have them run back to back while it drains.
    const passes = jest.spyOn(t.app.get(WebhookSweeper) as unknown as { pass(): Promise<number> }, 'pass');
    open = true;
    release(200);

    await waitFor(
      async () => {
        const [{ n }] = await t.sql<{ n: number }>(`SELECT count(*)::int AS n FROM webhook_deliveries WHERE webhook_id = $1 AND status = 'succeeded'`, [webhook.id]);
        return n === total;
      },
      'every delivery sent',
      // A budget for a slow machine, far below the interval (passes at it would never come) and the timeout.
      100_000,
    );
    expect(new Set(receiver.at('/bulk').map((r) => r.headers['x-svc-event-id'])).size).toBe(total);
    passes.mockRestore();
  }, 180_000);

  it('does not run passes back to back while a slow receiver\'s full line frees a place or two at a time', async () => {
    receiver.respond = (r) => (r.path === '/hung' ? 'hang' : r.path === '/slow' ? new Promise((resolve) => setTimeout(() => resolve(200), 100)) : 200);
    await t.http.post('/webhooks').set(bearer(admin)).send({ url: `${base}/slow`, events: ['item.created'] }).expect(201);
    const passes = jest.spyOn(t.app.get(WebhookSweeper) as unknown as { pass(): Promise<number> }, 'pass');
    try {
      for (let at = 0; at < 2 * MAX_WAITING_PER_WEBHOOK + BATCH; at += 1000) {
        const items = Array.from({ length: 1000 }, (_, n) => ({ type: 'core.note', properties: { title: `slow ${at + n}` } }));
        await t.http.post('/items/bulk').set(bearer(admin)).send({ mode: 'create_only', items }).expect(200);
      }
      // Past its line and then the half a pass refills: the sweeper has fed it from the table.
      await waitFor(() => receiver.at('/slow').length >= MAX_WAITING_PER_WEBHOOK + BATCH, 'the slow receiver past its line', 120_000);
      // A pass per half line drained, and one more for each that found the line's room: a handful.
      // Chained whenever it took anything, a pass ran again at once for each place freed.
      expect(passes.mock.calls.length).toBeLessThanOrEqual(10);
    } finally {
      passes.mockRestore();
    }
  }, 180_000);
});

describe('the webhook sweeper, when a webhook is enabled again', () => {
  let t: TestApp;
  let receiver: Receiver;
  let base: string;
  let admin: string;

  beforeAll(async () => {
    receiver = new Receiver();
    base = await receiver.start();
    // No pass comes from the interval while the test runs: only the change can bring the deliveries.
    t = await startApp({ WEBHOOK_SWEEP_INTERVAL: '120s', WEBHOOK_RETRY_SCHEDULE: '2s,2s' });
    admin = (await bootstrapAdmin(t)).key;
  });
  afterAll(async () => {
    await t.close();
    await receiver.stop();
  });

  it('sends the retry whose job came while it was disabled, and a delivery never attempted, without waiting for the interval', async () => {
    let down = true;
    receiver.respond = () => (down ? 500 : 200);
    const hook = (await t.http.post('/webhooks').set(bearer(admin)).send({ url: `${base}/paused`, events: ['item.created'] }).expect(201)).body as { id: string };
    const rows = () =>
      t.sql<{ id: string; status: string; attempts: number; due: boolean }>(
        `SELECT id, status, attempts, next_attempt_at <= now() AS due FROM webhook_deliveries WHERE webhook_id = $1 ORDER BY attempts DESC`,
        [hook.id],
      );
    await t.http.post('/items').set(bearer(admin)).send({ type: 'core.note', properties: { title: 'n' } }).expect(201);
    const [failed] = await waitFor(async () => {
      const r = await rows();
      return r.length === 1 && r[0].attempts === 1 && r;
    }, 'the first attempt failed');
    const redis = new Redis(REDIS_URL);
    try {
      const retryQueued = async () => (await redis.exists(`${t.config.REDIS_PREFIX}bull:webhooks:${failed.id}:1`)) === 1;
      await waitFor(retryQueued, 'the retry queued');
      await t.http.patch(`/webhooks/${hook.id}`).set(bearer(admin)).send({ disabled: true }).expect(200);
      // The retry's job came, found the webhook disabled, and is done: the delivery waits, due.
      const dispatcher = t.app.get(WebhookDispatcher);
      await waitFor(
        async () => !(await retryQueued()) && !dispatcher.queuedHere([]).deliveryIds.includes(failed.id) && (await rows())[0].due,
        'the retry\'s job done while the webhook was disabled',
      );
    } finally {
      redis.disconnect();
    }
    expect(await rows()).toMatchObject([{ status: 'pending', attempts: 1, due: true }]);
    expect(receiver.at('/paused')).toHaveLength(1);
    // A first attempt that found the webhook disabled leaves such a row, due and never attempted.
    await t.sql(
      `INSERT INTO webhook_deliveries (tenant_id, id, webhook_id, event_id, event, status, attempts, next_attempt_at)
       SELECT tenant_id, gen_random_uuid(), webhook_id, event_id, event, 'pending', 0, now() FROM webhook_deliveries WHERE id = $1`,
      [failed.id],
    );

    down = false;
    await t.http.patch(`/webhooks/${hook.id}`).set(bearer(admin)).send({ disabled: false }).expect(200);
    await waitFor(async () => (await rows()).every((d) => d.status === 'succeeded'), 'both deliveries sent', 30_000);
    expect(receiver.at('/paused')).toHaveLength(3);
  }, 60_000);

  it('sends the first attempts that waited in the webhook\'s line while it was disabled, their leases given up', async () => {
    const hook = (await t.http.post('/webhooks').set(bearer(admin)).send({ url: `${base}/lined`, events: ['item.created'] }).expect(201)).body as { id: string };
    // The receiver holds its answers, so that the webhook's slots stay taken and the rest wait in line.
    let open!: () => void;
    const gate = new Promise<number>((resolve) => (open = () => resolve(200)));
    receiver.respond = (req) => (req.path === '/lined' ? gate : 200);
    const total = 60;
    const items = Array.from({ length: total }, (_, i) => ({ type: 'core.note', properties: { title: `lined ${i}` } }));
    await t.http.post('/items/bulk').set(bearer(admin)).send({ mode: 'create_only', items }).expect(200);
    await waitFor(() => receiver.at('/lined').length > 0, 'the first attempts under way');
    await t.http.patch(`/webhooks/${hook.id}`).set(bearer(admin)).send({ disabled: true }).expect(200);
    open();
    const dispatcher = t.app.get(WebhookDispatcher);
    const rows = () => t.sql<{ status: string; leased: boolean }>(`SELECT status, lease_until > now() AS leased FROM webhook_deliveries WHERE webhook_id = $1`, [hook.id]);
    // Every attempt in line had its turn, found the webhook disabled and left its row due.
    await waitFor(async () => dispatcher.queuedHere([]).deliveryIds.length === 0 && (await rows()).length === total, 'the line worked through');
    const waiting = (await rows()).filter((r) => r.status === 'pending');
    expect(waiting.length).toBeGreaterThan(0);
    expect(waiting.filter((r) => r.leased)).toEqual([]);

    await t.http.patch(`/webhooks/${hook.id}`).set(bearer(admin)).send({ disabled: false }).expect(200);
    await waitFor(async () => (await rows()).every((r) => r.status === 'succeeded'), 'every delivery sent', 30_000);
    expect(new Set(receiver.at('/lined').map((r) => r.headers['x-svc-event-id'])).size).toBe(total);
  }, 90_000);
});
