/**
 * The webhook dispatcher with a real receiver on 127.0.0.1: webhooks that share a receiver host
 * (of one tenant or several) do not starve one another of connections; a first attempt waiting
 * in its webhook's line whose credential was narrowed meanwhile goes out for the credential as it
 * is then, or not at all; an admin's forced retry leaves a delivery's scheduled retry where it was.
 */
import { PER_WEBHOOK_CONCURRENCY } from '../src/webhooks/webhook-dispatcher';
import { bearer, bootstrapAdmin, createKey, createTenant, startApp, TestApp } from './support/app';
import { Receiver } from './support/receiver';
import { waitFor } from './support/wait';

/** A status the receiver answers with once the test says so. */
function deferred() {
  let answer!: (status: number) => void;
  const status = new Promise<number>((resolve) => (answer = resolve));
  return { status, answer };
}

describe('webhook dispatch (e2e)', () => {
  const receiver = new Receiver();
  let t: TestApp;
  let admin: string;
  let base: string;
  /** Receivers held by a test, answered before the app closes so that its shutdown does not wait on them. */
  const holds: Array<ReturnType<typeof deferred>> = [];
  const hold = () => {
    const d = deferred();
    holds.push(d);
    return d;
  };

  beforeAll(async () => {
    base = await receiver.start();
    // A timeout far longer than any wait below: an attempt held up behind other webhooks' connections
    // would arrive only after it, so a wait for it fails instead of passing late.
    t = await startApp({ WEBHOOK_TIMEOUT_MS: '60000', WEBHOOK_RETRY_SCHEDULE: '1s,1s', WEBHOOK_SWEEP_INTERVAL: '500ms' });
    admin = (await bootstrapAdmin(t)).key;
  });
  afterAll(async () => {
    for (const h of holds) h.answer(200);
    await t?.close();
    await receiver.stop();
  });
  beforeEach(() => {
    receiver.respond = () => 200;
  });

  const registerAt = async (key: string, path: string, body: Record<string, unknown> = {}) =>
    (await t.http.post('/webhooks').set(bearer(key)).send({ url: `${base}${path}`, events: ['item.created'], ...body }).expect(201)).body.id as string;
  const count = async (sql: string, params: unknown[]) => Number((await t.sql<{ n: string }>(`SELECT count(*) AS n FROM webhook_deliveries WHERE ${sql}`, params))[0].n);

  it('gives every webhook on one receiver host its own attempts: 17 whose receiver holds them all delay no other webhook there, of their tenant or another', async () => {
    const crowd = await createTenant(t, admin, 'crowded host');
    const slow = Array.from({ length: PER_WEBHOOK_CONCURRENCY + 1 }, (_, i) => `/crowd-held-${i}`);
    for (const path of slow) await registerAt(crowd.key, path);
    await registerAt(admin, '/crowd-healthy');
    await registerAt(crowd.key, '/crowd-neighbour');
    const held = hold();
    receiver.respond = (r) => (slow.includes(r.path) ? held.status : 200);
    const owed = slow.length * PER_WEBHOOK_CONCURRENCY;
    const open = () => slow.reduce((n, path) => n + receiver.at(path).length, 0);
    try {
      const items = Array.from({ length: PER_WEBHOOK_CONCURRENCY }, (_, i) => ({ type: 'core.note', properties: { title: `crowd ${i}` } }));
      await t.http.post('/items/bulk').set(bearer(crowd.key)).send({ mode: 'create_only', items }).expect(200);
      // As many held as a cap of 256 connections to the host, shared by its webhooks, let through.
      await waitFor(() => open() >= owed - PER_WEBHOOK_CONCURRENCY, 'the slow webhooks\' attempts held');
      await t.http.post('/items').set(bearer(admin)).send({ type: 'core.note', properties: { title: 'healthy' } }).expect(201);
      const [healthy] = await waitFor(() => receiver.at('/crowd-healthy').length === 1 && receiver.at('/crowd-healthy'), 'the healthy webhook\'s delivery');
      expect(JSON.parse(healthy.body).item.properties).toEqual({ title: 'healthy' });
      // Every slow webhook has all of its attempts open at once, and the same tenant's other webhook on the host got its deliveries.
      await waitFor(() => open() === owed, 'every slow webhook\'s attempts open at once');
      await waitFor(() => receiver.at('/crowd-neighbour').length === PER_WEBHOOK_CONCURRENCY, 'the neighbouring webhook\'s deliveries');
      // All of that while the slow webhooks' receiver still held every one of their attempts.
      for (const path of slow) expect([path, receiver.at(path).length, receiver.maxOpen.get(path)]).toEqual([path, PER_WEBHOOK_CONCURRENCY, PER_WEBHOOK_CONCURRENCY]);
    } finally {
      held.answer(200);
    }
    await waitFor(async () => (await count(`tenant_id = $1 AND status = 'succeeded'`, [crowd.tenantId])) === owed + PER_WEBHOOK_CONCURRENCY, 'the held deliveries recorded');
  });

  it('sends no first attempt waiting in line as planned once its credential was narrowed: re-rendered for it as it is then, or failed with why', async () => {
    await t.http.post('/types').set(bearer(admin)).send({ name: 'acme.queued', schema: { type: 'object' } }).expect(201);
    // One key loses the type altogether, the other an extension namespace.
    const narrowed = await createKey(t, admin, { label: 'narrowed', type_permissions: { 'acme.*': 'read' } });
    const trimmed = await createKey(t, admin, { label: 'trimmed', type_permissions: { 'acme.*': 'read' }, extension_permissions: { 'pub.*': 'read' } });
    const hooks = { narrowed: await registerAt(narrowed.key, '/narrowed'), trimmed: await registerAt(trimmed.key, '/trimmed') };
    const first = { narrowed: hold(), trimmed: hold() };
    receiver.respond = (r) => (r.path === '/narrowed' ? first.narrowed.status : r.path === '/trimmed' && receiver.at('/trimmed').length <= PER_WEBHOOK_CONCURRENCY ? first.trimmed.status : 200);
    const total = 40;
    const items = Array.from({ length: total }, (_, i) => ({ type: 'acme.queued', properties: { i }, extensions: { 'pub.info': { i } } }));
    await t.http.post('/items/bulk').set(bearer(admin)).send({ mode: 'create_only', items }).expect(200);
    // Each webhook has its first PER_WEBHOOK_CONCURRENCY attempts under way, and the rest waiting in line.
    await waitFor(() => receiver.at('/narrowed').length === PER_WEBHOOK_CONCURRENCY && receiver.at('/trimmed').length === PER_WEBHOOK_CONCURRENCY, 'the first attempts under way');

    await t.http.patch(`/keys/${narrowed.id}`).set(bearer(admin)).send({ type_permissions: { 'core.bookmark': 'read' } }).expect(200);
    await t.http.patch(`/keys/${trimmed.id}`).set(bearer(admin)).send({ extension_permissions: {} }).expect(200);
    first.narrowed.answer(500);
    first.trimmed.answer(200);

    // The trimmed key's deliveries all arrive; those that waited without what the key may no longer read.
    const got = await waitFor(() => receiver.at('/trimmed').length === total && receiver.at('/trimmed'), 'every delivery of the trimmed key');
    const extensions = got.map((r) => JSON.parse(r.body).item.extensions ?? {});
    expect(extensions.slice(0, PER_WEBHOOK_CONCURRENCY).every((e) => 'pub.info' in e)).toBe(true);
    expect(extensions.slice(PER_WEBHOOK_CONCURRENCY).filter((e) => 'pub.info' in e)).toEqual([]);
    await waitFor(async () => (await count(`webhook_id = $1 AND status = 'succeeded'`, [hooks.trimmed])) === total, 'the trimmed key\'s deliveries recorded');
    // The narrowed key's are given up with why: those that waited unsent, those under way at their retry.
    await waitFor(async () => (await count(`webhook_id = $1 AND status = 'failed'`, [hooks.narrowed])) === total, 'the narrowed key\'s deliveries given up');
    expect(await count(`webhook_id = $1 AND last_error LIKE '%may no longer receive%'`, [hooks.narrowed])).toBe(total);
    expect(receiver.at('/narrowed')).toHaveLength(PER_WEBHOOK_CONCURRENCY);
  });

  it('leaves a pending delivery\'s scheduled retry where it was when an admin\'s forced retry fails, and a failed one failed', async () => {
    const hookId = await registerAt(admin, '/forced');
    receiver.respond = (r) => (r.path === '/forced' ? 503 : 200);
    await t.http.post('/items').set(bearer(admin)).send({ type: 'core.note', properties: { title: 'forced' } }).expect(201);
    type Row = { id: string; status: string; attempts: number; forced_attempts: number; next_attempt_at: string | null; lease_until: Date | null };
    const row = async (where: string, params: unknown[]) =>
      (await t.sql<Row>(`SELECT id, status, attempts, forced_attempts, next_attempt_at::text, lease_until FROM webhook_deliveries WHERE ${where}`, params))[0];
    const { id } = await waitFor(async () => {
      const r = await row(`webhook_id = $1`, [hookId]);
      return r?.attempts === 1 && r.lease_until === null && r;
    }, 'the first attempt recorded');
    // Its retry is scheduled an hour out, so that only the forced attempt comes meanwhile.
    const [{ next_attempt_at: scheduled }] = await t.sql<{ next_attempt_at: string }>(
      `UPDATE webhook_deliveries SET next_attempt_at = now() + interval '1 hour' WHERE id = $1 RETURNING next_attempt_at::text`,
      [id],
    );
    const retry = () => t.http.post(`/webhooks/${hookId}/deliveries/${id}/retry`).set(bearer(admin)).send({});
    await retry().expect(202);
    const afterForced = await waitFor(async () => {
      const r = await row(`id = $1`, [id]);
      return r.attempts === 2 && r.lease_until === null && r;
    }, 'the forced attempt recorded');
    expect(afterForced).toMatchObject({ status: 'pending', forced_attempts: 1, next_attempt_at: scheduled });
    expect(receiver.at('/forced')).toHaveLength(2);

    // The schedule goes on as before: its two retries, then failed; a forced attempt then leaves it failed.
    await t.sql(`UPDATE webhook_deliveries SET next_attempt_at = now() WHERE id = $1`, [id]);
    await waitFor(async () => (await row(`id = $1`, [id])).status === 'failed', 'the scheduled retries');
    await retry().expect(202);
    const afterFailed = await waitFor(async () => {
      const r = await row(`id = $1`, [id]);
      return r.attempts === 5 && r.lease_until === null && r;
    }, 'the forced attempt of the failed delivery recorded');
    expect(afterFailed).toMatchObject({ status: 'failed', forced_attempts: 2, next_attempt_at: null });
  });
});
