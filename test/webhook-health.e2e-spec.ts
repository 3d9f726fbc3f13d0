/**
 * A webhook's `health`, computed from its deliveries when it is read: null and zero before any
 * delivery; a success and a receiver's failures as they happen, counted and then cleared by a
 * success; deliveries not attempted yet counted as pending, not as failures; the last success
 * found past the window of recent deliveries, and the failures capped at it; the list, the
 * single read and the changes agreeing; `?health=failing`; another tenant's webhooks untouched.
 * Real receiver on 127.0.0.1, a short retry schedule.
 */
import { HEALTH_WINDOW } from '../src/webhooks/webhook-health';
import { bearer, bootstrapAdmin, createTenant, startApp, TestApp } from './support/app';
import { badFields, expectError } from './support/envelope';
import { Receiver } from './support/receiver';
import { waitFor } from './support/wait';

const NONE = {
  last_attempt_at: null,
  last_status: null,
  last_status_code: null,
  last_success_at: null,
  last_failure_at: null,
  consecutive_failures: 0,
  pending: 0,
};

describe('webhook health (e2e)', () => {
  let t: TestApp;
  let admin: string;
  let receiver: Receiver;
  let base: string;
  let path = 0;
  /** What the receiver answers per path; 200 for a path not in it. */
  const answers = new Map<string, number | Promise<number>>();

  const post = (key: string, url: string, body: unknown) => t.http.post(url).set(bearer(key)).send(body as object);
  const get = (key: string, url: string) => t.http.get(url).set(bearer(key));

  async function register(key: string, answer?: number | Promise<number>) {
    const hookPath = `/health-${++path}`;
    if (answer !== undefined) answers.set(hookPath, answer);
    const res = await post(key, '/webhooks', { url: `${base}${hookPath}`, events: ['item.created'] });
    expect(res.status).toBe(201);
    return { ...res.body, path: hookPath } as { id: string; path: string; health: typeof NONE };
  }

  const health = async (key: string, id: string) => (await get(key, `/webhooks/${id}`).expect(200)).body.health as typeof NONE;
  const note = (key: string) => post(key, '/items', { type: 'core.note', properties: { title: 'n' } }).expect(201);
  const listed = async (key: string, query = '') => (await get(key, `/webhooks?limit=100${query}`).expect(200)).body.webhooks as Array<{ id: string; health: typeof NONE }>;

  beforeAll(async () => {
    receiver = new Receiver();
    base = await receiver.start();
    receiver.respond = (req) => answers.get(req.path) ?? 200;
    // A timeout well past the second after which a running first attempt's row is written (pending, not attempted yet).
    t = await startApp({ WEBHOOK_RETRY_SCHEDULE: '1s,1s', WEBHOOK_SWEEP_INTERVAL: '500ms', WEBHOOK_TIMEOUT_MS: '10000' });
    admin = (await bootstrapAdmin(t)).key;
  });
  afterAll(async () => {
    await t.close();
    await receiver.stop();
  });

  it('is null and zero for a webhook without deliveries, in the creation, the read and the list', async () => {
    const hook = await register(admin);
    expect(hook.health).toEqual(NONE);
    expect(await health(admin, hook.id)).toEqual(NONE);
    expect((await listed(admin)).find((w) => w.id === hook.id)?.health).toEqual(NONE);
  });

  it('shows a success; then a failing receiver\'s failures, counted until a success clears them', async () => {
    const hook = await register(admin);
    await note(admin);
    const ok = await waitFor(async () => {
      const h = await health(admin, hook.id);
      return h.last_success_at !== null && h;
    }, 'the success');
    expect(ok).toEqual({ ...NONE, last_attempt_at: ok.last_success_at, last_status: 'succeeded', last_status_code: 200, last_success_at: expect.any(String) });

    answers.set(hook.path, 500);
    await note(admin);
    await note(admin);
    // Three attempts each on this schedule, then failed.
    await waitFor(async () => (await get(admin, `/webhooks/${hook.id}/deliveries?status=failed`).expect(200)).body.deliveries.length === 2, 'both deliveries to fail');
    const failing = await health(admin, hook.id);
    expect(failing).toEqual({
      last_attempt_at: failing.last_failure_at,
      last_status: 'failed',
      last_status_code: 500,
      last_success_at: ok.last_success_at,
      last_failure_at: expect.any(String),
      consecutive_failures: 2,
      pending: 0,
    });
    expect(Date.parse(failing.last_failure_at!)).toBeGreaterThan(Date.parse(ok.last_success_at!));
    expect((await listed(admin, '&health=failing')).map((w) => w.id)).toContain(hook.id);

    answers.delete(hook.path);
    await note(admin);
    const back = await waitFor(async () => {
      const h = await health(admin, hook.id);
      return h.consecutive_failures === 0 && h;
    }, 'the failures to clear');
    expect(back).toEqual({ ...failing, last_attempt_at: back.last_success_at, last_status: 'succeeded', last_status_code: 200, last_success_at: expect.any(String), consecutive_failures: 0 });
    expect(Date.parse(back.last_success_at!)).toBeGreaterThan(Date.parse(failing.last_failure_at!));
    expect((await listed(admin, '&health=failing')).map((w) => w.id)).not.toContain(hook.id);
  });

  it('counts a delivery whose first attempt is still running as pending, not as a failure', async () => {
    let answer!: (status: number) => void;
    const hook = await register(admin, new Promise<number>((resolve) => (answer = resolve)));
    await note(admin);
    // The row is written once the attempt has run for a second: pending, not attempted yet.
    const running = await waitFor(async () => {
      const h = await health(admin, hook.id);
      return h.pending === 1 && h;
    }, 'the delivery to be listed pending');
    expect(running).toEqual({ ...NONE, pending: 1 });
    expect((await listed(admin, '&health=failing')).map((w) => w.id)).not.toContain(hook.id);
    answer(200);
    const done = await waitFor(async () => {
      const h = await health(admin, hook.id);
      return h.pending === 0 && h;
    }, 'the delivery to succeed');
    expect(done).toMatchObject({ last_status: 'succeeded', last_status_code: 200, consecutive_failures: 0 });
  });

  it(`counts failures over the newest ${HEALTH_WINDOW} deliveries and finds the last success past them`, async () => {
    const hook = await register(admin);
    await note(admin);
    const ok = await waitFor(async () => {
      const h = await health(admin, hook.id);
      return h.last_success_at !== null && h;
    }, 'the success');
    answers.set(hook.path, 503);
    const items = Array.from({ length: HEALTH_WINDOW + 5 }, (_, i) => ({ type: 'core.note', properties: { title: `bulk ${i}` } }));
    await post(admin, '/items/bulk', { mode: 'upsert', items }).expect(200);
    const failing = await waitFor(async () => {
      const h = await health(admin, hook.id);
      return h.consecutive_failures === HEALTH_WINDOW && h.pending === 0 && h;
    }, 'every delivery to fail', 60_000, 250);
    expect(failing).toMatchObject({ last_status: 'failed', last_status_code: 503, last_success_at: ok.last_success_at });
    answers.delete(hook.path);
  }, 90_000);

  it('answers the same health in the list, the read and a change, and in the removal\'s answer', async () => {
    const failing = await register(admin, 500);
    await note(admin);
    await waitFor(async () => (await health(admin, failing.id)).last_status === 'failed', 'a failure');
    await waitFor(async () => (await health(admin, failing.id)).pending === 0, 'the retries to end', 15_000);
    // Nothing is in flight for any webhook now but another test's leftovers: compare once they settle.
    await waitFor(async () => (await listed(admin)).every((w) => w.health.pending === 0), 'every delivery to settle', 30_000);
    for (const w of await listed(admin)) expect(await health(admin, w.id)).toEqual(w.health);
    const one = await health(admin, failing.id);
    expect((await t.http.patch(`/webhooks/${failing.id}`).set(bearer(admin)).send({ disabled: true }).expect(200)).body.health).toEqual(one);
    expect((await post(admin, `/webhooks/${failing.id}/secret`, {}).expect(200)).body.health).toEqual(one);
    expect((await t.http.delete(`/webhooks/${failing.id}`).set(bearer(admin)).expect(200)).body.health).toEqual(one);
  });

  it('keeps to its tenant: another tenant\'s webhooks and deliveries do not show', async () => {
    const mine = await register(admin, 500);
    await note(admin);
    await waitFor(async () => (await health(admin, mine.id)).consecutive_failures === 1, 'the failure');
    const other = (await createTenant(t, admin, 'health-other')).key;
    const theirs = await register(other);
    expect(await health(other, theirs.id)).toEqual(NONE);
    expect((await listed(other)).map((w) => w.id)).toEqual([theirs.id]);
    expect(await listed(other, '&health=failing')).toEqual([]);
    expectError(await get(other, `/webhooks/${mine.id}`), 404, 'webhook_not_found');
    await note(other);
    await waitFor(async () => (await health(other, theirs.id)).last_status === 'succeeded', 'their success');
    expect((await health(admin, mine.id)).consecutive_failures).toBe(1);
    expect((await listed(admin)).map((w) => w.id)).not.toContain(theirs.id);
  });

  it('takes health=failing and refuses any other health filter', async () => {
    await get(admin, '/webhooks?health=failing').expect(200);
    const res = await get(admin, '/webhooks?health=ok');
    expectError(res, 400, 'validation_error');
    expect(badFields(res)).toEqual(['health']);
  });
});
