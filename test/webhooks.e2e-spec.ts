/**
 * Webhooks end to end, with a real receiver on 127.0.0.1: registration rules, signed deliveries
 * checked with the receivers' own verifier libraries (stripe, standardwebhooks), retries on a
 * short schedule, failure and manual retry, who receives what, nothing for a rolled-back
 * change, a Redis loss, and a hanging receiver that does not hold up another webhook; receivers
 * on raw sockets that misbehave on the wire (a body reset or misframed after the status, interim
 * 1xx statuses, an unasked 100 Continue, a Keep-Alive hint of days). Bodies
 * carry only the edges the registering credential may read; a webhook registered with an OAuth
 * token keeps to that token's scopes, and belongs to no narrower token of its client. First
 * attempts waiting in line are not sent to a webhook changed or deleted meanwhile (on another
 * instance), nor for a revoked credential; an admin retry never takes over a running attempt.
 */
import { createHmac, randomBytes, randomUUID } from 'node:crypto';
import type { Socket } from 'node:net';
import { Webhook } from 'standardwebhooks';
import Stripe from 'stripe';
import Redis from 'ioredis';
import { Client } from 'pg';
import { SERVICE_VERSION } from '../src/common/version';
import { SecretBox } from '../src/crypto/secret-box';
import { EventsJanitor } from '../src/events/events-janitor';
import { PER_WEBHOOK_CONCURRENCY } from '../src/webhooks/webhook-dispatcher';
import { secretAad } from '../src/webhooks/signature';
import { WebhookFanout } from '../src/webhooks/webhook-fanout';
import { WebhookSweeper } from '../src/webhooks/webhook-sweeper';
import { bearer, bootstrapAdmin, clearRedisPrefix, createKey, createTenant, REDIS_URL, startApp, TestApp } from './support/app';
import { expectLocation } from './support/created';
import { badFields, expectError } from './support/envelope';
import { Receiver } from './support/receiver';
import { RawReceiver } from './support/raw-receiver';
import { appBehindProxy, redisUp } from './support/behind-proxy';
import { waitFor } from './support/wait';

describe('webhooks (e2e)', () => {
  let t: TestApp;
  let admin: string;
  let receiver: Receiver;
  let base: string;
  let path = 0;

  const post = (key: string, url: string, body: unknown) => t.http.post(url).set(bearer(key)).send(body as object);
  const get = (key: string, url: string) => t.http.get(url).set(bearer(key));

  /** Registers a webhook at a fresh receiver path; returns it with its path. */
  async function register(key: string, body: Record<string, unknown> = {}) {
    const hookPath = `/hook-${++path}`;
    const res = await post(key, '/webhooks', { url: `${base}${hookPath}`, events: ['*'], ...body });
    if (res.status !== 201) throw new Error(`webhook registration failed: ${res.status} ${res.text}`);
    return { ...res.body, path: hookPath } as { id: string; secret: string; path: string };
  }

  const note = (key = admin, extra: Record<string, unknown> = {}) => post(key, '/items', { type: 'core.note', properties: { title: 'n' }, ...extra });

  /** The webhook's newest delivery, once it has succeeded. */
  const succeeded = (hookId: string) =>
    waitFor(async () => {
      const [d] = (await get(admin, `/webhooks/${hookId}/deliveries`).expect(200)).body.deliveries;
      return d?.status === 'succeeded' && d;
    }, 'the delivery to succeed');

  /** The webhook's newest delivery, once its first attempt is recorded. */
  const firstAttempted = (hookId: string) =>
    waitFor(async () => {
      const [d] = (await get(admin, `/webhooks/${hookId}/deliveries`).expect(200)).body.deliveries;
      return d?.attempts === 1 && d;
    }, 'the first attempt');

  beforeAll(async () => {
    receiver = new Receiver();
    base = await receiver.start();
    t = await startApp({ WEBHOOK_RETRY_SCHEDULE: '1s,1s', WEBHOOK_SWEEP_INTERVAL: '500ms', WEBHOOK_TIMEOUT_MS: '1000' });
    admin = (await bootstrapAdmin(t)).key;
  });
  afterAll(async () => {
    await t.close();
    await receiver.stop();
  });
  beforeEach(() => {
    receiver.respond = () => 200;
  });

  describe('registration', () => {
    it('answers Location: /webhooks/{id}, which GET reads', async () => {
      const res = await post(admin, '/webhooks', { url: `${base}/located`, events: ['item.created'] });
      expect((await expectLocation(t, res, `/webhooks/${res.body.id}`, admin)).body.id).toBe(res.body.id);
    });

    it('creates with a generated whsec_ secret shown once, stored encrypted', async () => {
      const hook = await register(admin);
      expect(hook.secret).toMatch(/^whsec_[A-Za-z0-9+/]{40,}={0,2}$/);
      const fetched = (await get(admin, `/webhooks/${hook.id}`).expect(200)).body;
      expect(fetched).not.toHaveProperty('secret');
      expect(fetched).toMatchObject({ id: hook.id, events: ['*'], type_filter: null, disabled: false });
      const [row] = await t.sql<{ secret_sealed: string }>(`SELECT secret_sealed FROM webhooks WHERE id = $1`, [hook.id]);
      expect(row.secret_sealed).not.toContain(hook.secret.slice(6, 20));
      expect(JSON.stringify(await t.sql('SELECT * FROM webhooks'))).not.toContain(hook.secret);
    });

    it('rotates a secret: the new one shown once, deliveries signed by both until the old one expires (0: at once), others\' webhooks 404', async () => {
      const hook = await register(admin, { events: ['item.created'] });
      const rotate = (body: Record<string, unknown>, key = admin) => post(key, `/webhooks/${hook.id}/secret`, body);
      const rotated = await rotate({}).expect(200);
      expect(rotated.headers['cache-control']).toBe('no-store');
      expect(rotated.body.secret).toMatch(/^whsec_/);
      expect(rotated.body.secret).not.toBe(hook.secret);
      expect(Date.parse(rotated.body.previous_secret_expires_at) - Date.now()).toBeGreaterThan(86_300_000);
      const shown = (await get(admin, `/webhooks/${hook.id}`).expect(200)).body;
      expect(shown).toMatchObject({ previous_secret_expires_at: rotated.body.previous_secret_expires_at });
      expect(shown.secret).toBeUndefined();
      const stripe = new Stripe('sk_test_unused');
      const verifies = (req: { body: string; headers: Record<string, unknown> }, secret: string) => {
        try {
          stripe.webhooks.constructEvent(req.body, String(req.headers['x-svc-signature']), secret);
          new Webhook(secret, secret.startsWith('whsec_') ? undefined : { format: 'raw' }).verify(req.body, req.headers as Record<string, string>);
          return true;
        } catch {
          return false;
        }
      };
      await note().expect(201);
      const [both] = await waitFor(() => receiver.at(hook.path).length === 1 && receiver.at(hook.path), 'a delivery signed by both');
      expect([verifies(both, rotated.body.secret), verifies(both, hook.secret), verifies(both, `whsec_${'A'.repeat(43)}=`)]).toEqual([true, true, false]);

      const own = 'my-own-secret,rotated-in';
      const ended = await rotate({ secret: own, expire_previous_in: 0 }).expect(200);
      expect(ended.body).toMatchObject({ secret: own, previous_secret_expires_at: null });
      await note().expect(201);
      const [, only] = await waitFor(() => receiver.at(hook.path).length === 2 && receiver.at(hook.path), 'a delivery signed by the new secret alone');
      expect([verifies(only, own), verifies(only, rotated.body.secret), verifies(only, hook.secret)]).toEqual([true, false, false]);

      for (const bad of [-1, 604_801, 1.5, '60', null]) expect(badFields(await rotate({ expire_previous_in: bad }))).toEqual(['expire_previous_in']);
      expect(badFields(await rotate({ secret: 'short' }))).toEqual(['secret']);
      const member = (await createKey(t, admin, { label: 'rotating-member', type_permissions: { '*': 'read' } })).key;
      expectError(await rotate({}, member), 404, 'webhook_not_found');
      expect((await get(admin, `/webhooks/${hook.id}`).expect(200)).body.previous_secret_expires_at).toBeNull();

      // A retry with the same Idempotency-Key gets the secret it lost, the id in either case.
      const retried = (id: string) => post(admin, `/webhooks/${id}/secret`, {}).set('Idempotency-Key', `rotate-${hook.id}`);
      const first = await retried(hook.id).expect(200);
      const again = await retried(hook.id.toUpperCase()).expect(200);
      expect([again.headers['idempotent-replayed'], again.body.secret]).toEqual(['true', first.body.secret]);
    });

    it('refuses a chosen whsec_ secret Standard Webhooks libraries cannot decode; one they can verifies with them unchanged, and a stored one of the old rule still signs', async () => {
      const refused = ['whsec_abc-def_ghijklmnopqrstu', 'whsec_my.webhook.secret-2026', `whsec_${randomBytes(16).toString('base64')}`, `whsec_${randomBytes(32).toString('base64').replace(/=$/, '')}`];
      const hook = await register(admin, { events: ['item.created'] });
      for (const secret of refused) {
        const res = await post(admin, '/webhooks', { url: `${base}/x`, events: ['*'], secret });
        expect(badFields(res)).toEqual(['secret']);
        expect(res.body.error.details.fields[0].message).toMatch(/24-64 random bytes in padded standard base64/);
        expect(badFields(await post(admin, `/webhooks/${hook.id}/secret`, { secret }))).toEqual(['secret']);
      }
      // PATCH sets no secret, whatever its form.
      expect(badFields(await t.http.patch(`/webhooks/${hook.id}`).set(bearer(admin)).send({ secret: `whsec_${randomBytes(32).toString('base64')}` }))).toEqual(['secret']);

      // Chosen and decodable, at registration and at a rotation: `new Webhook(secret)` verifies the deliveries as it is.
      const chosen = `whsec_${randomBytes(24).toString('base64')}`;
      const own = await register(admin, { events: ['item.created'], secret: chosen });
      expect(own.secret).toBe(chosen);
      await note().expect(201);
      const [first] = await waitFor(() => receiver.at(own.path).length === 1 && receiver.at(own.path), 'a delivery signed by the chosen secret');
      expect(new Webhook(chosen).verify(first.body, first.headers as Record<string, string>)).toMatchObject({ event: 'item.created' });
      const rotatedTo = `whsec_${randomBytes(64).toString('base64')}`;
      await post(admin, `/webhooks/${own.id}/secret`, { secret: rotatedTo, expire_previous_in: 0 }).expect(200);
      await note().expect(201);
      const [, second] = await waitFor(() => receiver.at(own.path).length === 2 && receiver.at(own.path), 'a delivery signed by the rotated-in secret');
      expect(new Webhook(rotatedTo).verify(second.body, second.headers as Record<string, string>)).toMatchObject({ event: 'item.created' });

      // A whsec_ secret that is not base64, stored before the rule, keeps signing with its raw bytes.
      const legacy = 'whsec_my.webhook.secret-2026';
      const [row] = await t.sql<{ tenant_id: string }>(`SELECT tenant_id FROM webhooks WHERE id = $1`, [own.id]);
      await t.sql(`UPDATE webhooks SET secret_sealed = $2 WHERE id = $1`, [own.id, await t.app.get(SecretBox).seal(legacy, secretAad(row.tenant_id, own.id))]);
      await note().expect(201);
      const [, , third] = await waitFor(() => receiver.at(own.path).length === 3 && receiver.at(own.path), 'a delivery signed by the stored secret');
      expect(new Webhook(legacy, { format: 'raw' }).verify(third.body, third.headers as Record<string, string>)).toMatchObject({ event: 'item.created' });
      expect(new Stripe('sk_test_unused').webhooks.constructEvent(third.body, String(third.headers['x-svc-signature']), legacy)).toMatchObject({ event: 'item.created' });
    });

    it('validates every field, naming it', async () => {
      expect(badFields(await post(admin, '/webhooks', { url: 'ftp://x', events: ['*'] }))).toEqual(['url']);
      expect(badFields(await post(admin, '/webhooks', { url: `${base}/x`, events: ['item.exploded'] }))).toEqual(['events']);
      expect(badFields(await post(admin, '/webhooks', { url: `${base}/x`, events: [] }))).toEqual(['events']);
      expect(badFields(await post(admin, '/webhooks', { url: `${base}/x`, events: ['*'], type_filter: ['Bad!'] }))).toEqual(['type_filter']);
      // An empty list would select no item event, or read as every type: neither is what it says.
      expect(badFields(await post(admin, '/webhooks', { url: `${base}/x`, events: ['*'], type_filter: [] }))).toEqual(['type_filter']);
      const hook = await register(admin, { type_filter: ['core.note'] });
      expect(badFields(await t.http.patch(`/webhooks/${hook.id}`).set(bearer(admin)).send({ type_filter: [] }))).toEqual(['type_filter']);
      // A pattern listed twice would be stored, and listed back, twice.
      expect(badFields(await post(admin, '/webhooks', { url: `${base}/x`, events: ['item.created', 'item.created'] }))).toEqual(['events']);
      expect(badFields(await t.http.patch(`/webhooks/${hook.id}`).set(bearer(admin)).send({ type_filter: ['core.*', 'core.*'] }))).toEqual(['type_filter']);
      expect(badFields(await post(admin, '/webhooks', { url: `${base}/x`, events: ['*'], secret: 'short' }))).toEqual(['secret']);
      expect(badFields(await post(admin, '/webhooks', { url: 'https://no-such-host.invalid/x', events: ['*'] }))).toEqual(['url']);
      // Plain http is for local-development targets, even with private targets allowed.
      expect(badFields(await post(admin, '/webhooks', { url: 'http://93.184.216.34/x', events: ['*'] }))).toEqual(['url']);
    });

    it('lists with cursor pagination, updates, deletes; members see only their own; other tenants get 404', async () => {
      const member = (await createKey(t, admin, { label: 'm', type_permissions: { '*': 'read' } })).key;
      const mine = await register(member);
      const list = async (key: string, limit: number) => {
        const ids: string[] = [];
        for (let cursor: string | null = null, i = 0; i < 50; i++) {
          const page: any = (await get(key, `/webhooks?limit=${limit}${cursor ? `&cursor=${cursor}` : ''}`).expect(200)).body;
          ids.push(...page.webhooks.map((w: { id: string }) => w.id));
          if (!(cursor = page.next_cursor)) break;
        }
        return ids;
      };
      expect(await list(member, 1)).toEqual([mine.id]);
      const all = await list(admin, 2);
      expect(all).toContain(mine.id);
      expect(all.length).toBeGreaterThan(1);
      const adminHook = all.find((id) => id !== mine.id)!;
      expectError(await get(member, `/webhooks/${adminHook}`), 404, 'webhook_not_found');
      const other = (await createTenant(t, admin, 'other-webhooks')).key;
      expectError(await get(other, `/webhooks/${mine.id}`), 404, 'webhook_not_found');
      expectError(await t.http.patch(`/webhooks/${mine.id}`).set(bearer(other)).send({ disabled: true }), 404, 'webhook_not_found');
      expectError(await t.http.delete(`/webhooks/${mine.id}`).set(bearer(other)), 404, 'webhook_not_found');

      const patched = (await t.http.patch(`/webhooks/${mine.id}`).set(bearer(member)).send({ events: ['item.*'], type_filter: ['core.*'], disabled: true }).expect(200)).body;
      expect(patched).toMatchObject({ events: ['item.*'], type_filter: ['core.*'], disabled: true });
      expect((await t.http.patch(`/webhooks/${mine.id}`).set(bearer(admin)).send({ type_filter: null }).expect(200)).body.type_filter).toBeNull();
      await t.http.delete(`/webhooks/${mine.id}`).set(bearer(member)).expect(200);
      expectError(await get(admin, `/webhooks/${mine.id}`), 404, 'webhook_not_found');
    });

    it('answers one of several deletions sent at once 200, the others 404 as a deletion after it, with one audit row', async () => {
      for (let round = 0; round < 3; round++) {
        const hook = await register(admin);
        const answers = await Promise.all(Array.from({ length: 8 }, () => t.http.delete(`/webhooks/${hook.id}`).set(bearer(admin))));
        expect(answers.map((r) => r.status).sort()).toEqual([200, ...Array(7).fill(404)]);
        for (const r of answers.filter((r) => r.status === 404)) expectError(r, 404, 'webhook_not_found');
        expect(await t.sql(`SELECT 1 FROM audit_events WHERE action = 'webhook.deleted' AND details->>'webhook_id' = $1`, [hook.id])).toHaveLength(1);
      }
    });

    it('keeps both of two PATCHes of different fields sent at once', async () => {
      for (let round = 0; round < 10; round++) {
        const hook = await register(admin);
        const patch = (body: object) => t.http.patch(`/webhooks/${hook.id}`).set(bearer(admin)).send(body);
        const [moved, disabled] = await Promise.all([patch({ url: `${base}/moved-${round}` }), patch({ disabled: true })]);
        expect([moved.status, disabled.status]).toEqual([200, 200]);
        expect((await get(admin, `/webhooks/${hook.id}`).expect(200)).body).toMatchObject({ url: `${base}/moved-${round}`, disabled: true, events: ['*'] });
        expect(badFields(await patch({ url: 'ftp://x' }))).toEqual(['url']);
        await t.http.delete(`/webhooks/${hook.id}`).set(bearer(admin)).expect(200);
      }
    });

    it('refuses a url the parser would call as another (whitespace, control characters, backslashes, a form it rewrites) or port 0, on PATCH as on POST', async () => {
      const hook = await register(admin);
      const patch = (body: object) => t.http.patch(`/webhooks/${hook.id}`).set(bearer(admin)).send(body);
      const port = new URL(base).port;
      for (const url of [` ${base}/spaced `, `${base}/new\nline`, `${base}/tab\tbed`, `${base}/nul\u0000`, `http://127.0.0.1:${port}\\back\\slash`, 'http://127.0.0.1:0/x']) {
        expect(badFields(await post(admin, '/webhooks', { url, events: ['*'] }))).toEqual(['url']);
        expect(badFields(await patch({ url }))).toEqual(['url']);
      }
      // A form the parser rewrites would be shown as sent but delivered elsewhere: the answer names the form to send.
      const rewritten = expectError(await post(admin, '/webhooks', { url: 'http:/127.0.0.1:9/x', events: ['*'] }), 400, 'validation_error');
      expect(rewritten.details!.fields).toEqual([{ field: 'url', message: 'must be written as the URL deliveries go to: http://127.0.0.1:9/x' }]);
      expect(badFields(await patch({ url: `${base}/a/../b` }))).toEqual(['url']);
      // A PATCH is held to the rules of registration: plain http only to local-development targets.
      expect(badFields(await patch({ url: 'http://93.184.216.34/x' }))).toEqual(['url']);
      expect((await get(admin, `/webhooks/${hook.id}`).expect(200)).body.url).toBe(`${base}${hook.path}`);
      // What the parser keeps as it is passes, and is stored as sent.
      expect((await patch({ url: `${base}/a%20b?q=1` }).expect(200)).body.url).toBe(`${base}/a%20b?q=1`);
    });

    it('lets an OAuth token see and change only the webhooks registered within its own scopes, not a wider token\'s of its client', async () => {
      const client = (await post(admin, '/auth/clients', { grant_types: ['client_credentials'], scope: 'core.note:read *:read metadata:read' }).expect(201)).body;
      const token = async (scope: string) =>
        (await t.http.post('/auth/oauth2/token').auth(client.client_id, client.client_secret).type('form').send({ grant_type: 'client_credentials', scope }).expect(200))
          .body.access_token as string;
      const narrow = await token('core.note:read');
      const wide = await token('*:read metadata:read');
      const narrowHook = await register(narrow, { events: ['item.created'] });
      const wideHook = await register(wide, { events: ['item.created'] });
      const listed = async (key: string) => (await get(key, '/webhooks').expect(200)).body.webhooks.map((w: { id: string }) => w.id).sort();
      // Both were registered by the client's credential; the narrow token owns only its own.
      expect((await get(admin, `/webhooks/${wideHook.id}`).expect(200)).body.credential_id).toMatch(new RegExp(`^client:${client.client_id}:[0-9a-f]{16}$`));
      expect(await listed(narrow)).toEqual([narrowHook.id]);
      expectError(await get(narrow, `/webhooks/${wideHook.id}`), 404, 'webhook_not_found');
      expectError(await get(narrow, `/webhooks/${wideHook.id}/deliveries`), 404, 'webhook_not_found');
      expectError(await t.http.patch(`/webhooks/${wideHook.id}`).set(bearer(narrow)).send({ url: `${base}/taken-over`, events: ['*'] }), 404, 'webhook_not_found');
      expectError(await t.http.delete(`/webhooks/${wideHook.id}`).set(bearer(narrow)), 404, 'webhook_not_found');
      expect((await get(admin, `/webhooks/${wideHook.id}`).expect(200)).body).toMatchObject({ url: `${base}${wideHook.path}`, events: ['item.created'] });
      // A token with every scope either was registered with owns both; each owns its own.
      expect(await listed(await token('core.note:read *:read metadata:read'))).toEqual([narrowHook.id, wideHook.id].sort());
      expect(await listed(wide)).toEqual([wideHook.id]);
      await t.http.patch(`/webhooks/${narrowHook.id}`).set(bearer(narrow)).send({ disabled: true }).expect(200);
      await get(narrow, `/webhooks/${narrowHook.id}/deliveries`).expect(200);
    });
  });

  describe('delivery', () => {
    it('POSTs {event, item} with the five headers; both verifier libraries accept the signature', async () => {
      const hook = await register(admin, { events: ['item.created'] });
      const item = (await note(admin, { properties: { title: 'signed' } }).expect(201)).body;
      const [req] = await waitFor(() => receiver.at(hook.path).length > 0 && receiver.at(hook.path), 'the delivery');
      expect(req.headers['content-type']).toBe('application/json');
      expect(req.headers['x-svc-event']).toBe('item.created');
      expect(req.headers['x-svc-event-id']).toEqual(expect.any(String));
      expect(req.headers['x-svc-delivery-id']).toEqual(expect.any(String));
      const body = JSON.parse(req.body);
      expect(body).toEqual({ event: 'item.created', item: expect.objectContaining({ id: item.id, version: 1, properties: { title: 'signed' } }) });

      const header = String(req.headers['x-svc-signature']);
      const [, t0, v1] = /^t=(\d+),v1=([0-9a-f]{64})$/.exec(header)!;
      expect(createHmac('sha256', hook.secret).update(`${t0}.${req.body}`).digest('hex')).toBe(v1);
      expect(Math.abs(Date.now() / 1000 - Number(t0))).toBeLessThan(300);
      const stripe = new Stripe('sk_test_unused');
      expect(stripe.webhooks.constructEvent(req.body, header, hook.secret)).toMatchObject({ event: 'item.created' });
      expect(() => stripe.webhooks.constructEvent(req.body.replace('signed', 'forged'), header, hook.secret)).toThrow();
      const standard = new Webhook(hook.secret);
      expect(standard.verify(req.body, req.headers as Record<string, string>)).toMatchObject({ event: 'item.created' });
      expect(req.headers['webhook-id']).toBe(req.headers['x-svc-event-id']);
    });

    it('sends a test request on demand, signed as a delivery, disabled or not, and answers what the receiver said; not a delivery', async () => {
      const hook = await register(admin, { events: ['item.created'] });
      const ping = (await post(admin, `/webhooks/${hook.id}/test`, {}).expect(200)).body;
      expect(ping).toEqual({ event_id: expect.any(String), id: expect.any(String), status_code: 200, duration_ms: expect.any(Number), error: null, succeeded: true });
      const [req] = receiver.at(hook.path);
      expect(JSON.parse(req.body)).toEqual({ event: 'webhook.test', webhook: { id: hook.id } });
      expect([req.headers['x-svc-event'], req.headers['x-svc-event-id'], req.headers['x-svc-delivery-id'], req.headers['webhook-id']]).toEqual(['webhook.test', ping.event_id, ping.id, ping.event_id]);
      expect(new Stripe('sk_test_unused').webhooks.constructEvent(req.body, String(req.headers['x-svc-signature']), hook.secret)).toMatchObject({ event: 'webhook.test' });
      expect(new Webhook(hook.secret).verify(req.body, req.headers as Record<string, string>)).toMatchObject({ event: 'webhook.test' });
      expect(req.headers['user-agent']).toBe(`svc-webhooks/${SERVICE_VERSION}`);
      expect((await get(admin, `/webhooks/${hook.id}/deliveries`).expect(200)).body.deliveries).toEqual([]);

      // The receiver's refusal is the answer; a disabled webhook is tested all the same.
      await t.http.patch(`/webhooks/${hook.id}`).set(bearer(admin)).send({ disabled: true }).expect(200);
      receiver.respond = (r) => (r.path === hook.path ? 500 : 200);
      try {
        expect((await post(admin, `/webhooks/${hook.id}/test`, {}).expect(200)).body).toMatchObject({ status_code: 500, error: 'HTTP 500', succeeded: false });
      } finally {
        receiver.respond = () => 200;
      }
      expect(receiver.at(hook.path)).toHaveLength(2);
      // One at a time: a second while the receiver holds the first is 409, and sends nothing.
      let release!: () => void;
      const held = new Promise<number>((resolve) => (release = () => resolve(200)));
      receiver.respond = (r) => (r.path === hook.path ? held : 200);
      try {
        const first = post(admin, `/webhooks/${hook.id}/test`, {}).then((r) => r);
        await waitFor(() => receiver.at(hook.path).length === 3, 'the first test request');
        expectError(await post(admin, `/webhooks/${hook.id}/test`, {}), 409, 'conflict');
        release();
        expect((await first).body.succeeded).toBe(true);
      } finally {
        receiver.respond = () => 200;
      }
      expect(receiver.at(hook.path)).toHaveLength(3);
      // Who may: as for PATCH; another tenant's or a member's of another's is 404.
      const member = (await createKey(t, admin, { label: 'tester', type_permissions: { '*': 'read' } })).key as string;
      expectError(await post(member, `/webhooks/${hook.id}/test`, {}), 404, 'webhook_not_found');
      expectError(await post((await createTenant(t, admin, 'ping-other')).key, `/webhooks/${hook.id}/test`, {}), 404, 'webhook_not_found');
      expect(receiver.at(hook.path)).toHaveLength(3);
    });

    it('retries non-2xx on the schedule with the same event id, a new delivery id and a fresh signature', async () => {
      const hook = await register(admin, { events: ['item.created'] });
      receiver.respond = (r) => (r.path === hook.path && receiver.at(hook.path).length === 1 ? 500 : 200);
      await note().expect(201);
      const [first, second] = await waitFor(() => receiver.at(hook.path).length >= 2 && receiver.at(hook.path), 'the retry');
      expect(second.headers['x-svc-event-id']).toBe(first.headers['x-svc-event-id']);
      expect(second.headers['x-svc-delivery-id']).not.toBe(first.headers['x-svc-delivery-id']);
      expect(second.body).toBe(first.body);
      new Webhook(hook.secret).verify(second.body, second.headers as Record<string, string>);
      const delivery = await succeeded(hook.id);
      expect(delivery).toMatchObject({ event: 'item.created', attempts: 2, last_status_code: 200, next_attempt_at: null });
      expect(delivery.attempt_log.map((a: { status_code: number }) => a.status_code)).toEqual([500, 200]);
      expect(delivery.attempt_log[0]).toMatchObject({ attempt: 1, id: first.headers['x-svc-delivery-id'], error: expect.any(String), duration_ms: expect.any(Number) });
    });

    it('reads one delivery as the list shows it; another webhook\'s delivery is 404, as is another tenant\'s webhook', async () => {
      const hook = await register(admin, { events: ['item.created'] });
      const other = await register(admin, { events: ['item.created'] });
      await note().expect(201);
      const listed = await succeeded(hook.id);
      expect((await get(admin, `/webhooks/${hook.id}/deliveries/${listed.id}`).expect(200)).body).toEqual(listed);
      expectError(await get(admin, `/webhooks/${other.id}/deliveries/${listed.id}`), 404, 'not_found');
      expectError(await get(admin, `/webhooks/${hook.id}/deliveries/not-an-id`), 400, 'invalid_id');
      const stranger = (await createTenant(t, admin, 'delivery reader')).key;
      expectError(await get(stranger, `/webhooks/${hook.id}/deliveries/${listed.id}`), 404, 'webhook_not_found');
    });

    it('sends each tenant its own events only when the relay takes two tenants\' events in one pass', async () => {
      const other = await createTenant(t, admin, 'batched with root');
      const mine = await register(admin, { events: ['item.created'] });
      const theirs = await register(other.key, { events: ['item.created'] });
      const [a, b] = [(await note(admin).expect(201)).body.id, (await note(other.key).expect(201)).body.id];
      await waitFor(() => receiver.at(mine.path).length === 1 && receiver.at(theirs.path).length === 1, 'the first deliveries');
      // Copies of both events, committed together, for the relay's next pass to take (one pass, unless it ran between).
      const copies = await t.sql<{ id: string; tenant_id: string }>(
        `INSERT INTO events (tenant_id, id, name, credential_id, audience, payload)
         SELECT tenant_id, gen_random_uuid(), name, credential_id, audience, payload FROM events
          WHERE name = 'item.created' AND payload->'item'->>'id' = ANY($1::text[]) RETURNING id, tenant_id`,
        [[a, b]],
      );
      expect(copies).toHaveLength(2);
      await waitFor(() => receiver.at(mine.path).length === 2 && receiver.at(theirs.path).length === 2, 'the copies delivered');
      const eventIds = (hookPath: string) => receiver.at(hookPath).slice(1).map((r) => r.headers['x-svc-event-id']);
      expect(eventIds(mine.path)).toEqual(copies.filter((c) => c.tenant_id !== other.tenantId).map((c) => c.id));
      expect(eventIds(theirs.path)).toEqual(copies.filter((c) => c.tenant_id === other.tenantId).map((c) => c.id));
    });

    it('marks a delivery failed after the last retry, lists it by status, and an admin can retry it', async () => {
      const hook = await register(admin, { events: ['item.created'] });
      const member = (await createKey(t, admin, { label: 'retry-member', type_permissions: { '*': 'write' } })).key;
      receiver.respond = (r) => (r.path === hook.path ? 503 : 200);
      await note().expect(201);
      const failed = await waitFor(async () => {
        const list = (await get(admin, `/webhooks/${hook.id}/deliveries?status=failed`).expect(200)).body.deliveries;
        return list.length === 1 && list[0];
      }, 'the delivery to fail');
      expect(failed).toMatchObject({ status: 'failed', attempts: 3, last_status_code: 503 });
      expect((await get(admin, `/webhooks/${hook.id}/deliveries?status=pending`).expect(200)).body.deliveries).toEqual([]);
      expect(badFields(await get(admin, `/webhooks/${hook.id}/deliveries?status=lost`))).toEqual(['status']);

      expectError(await post(member, `/webhooks/${hook.id}/deliveries/${failed.id}/retry`, {}), 403, 'forbidden');
      // The webhook's line full of attempts the receiver holds: a retry's attempt waits its turn, and
      // retries at once must not all pass meanwhile (202s that attempt nothing): one is taken, the
      // others are told an attempt is under way.
      let release!: () => void;
      const held = new Promise<number>((resolve) => (release = () => resolve(200)));
      receiver.respond = (r) => (r.path === hook.path ? held : 200);
      await Promise.all(Array.from({ length: PER_WEBHOOK_CONCURRENCY }, () => note().expect(201)));
      // At least: on a slow machine attempts held past WEBHOOK_TIMEOUT_MS (1 s here) are retried meanwhile.
      await waitFor(() => receiver.at(hook.path).length >= 3 + PER_WEBHOOK_CONCURRENCY, 'the webhook\'s line full');
      const answers = await Promise.all(Array.from({ length: 4 }, () => post(admin, `/webhooks/${hook.id}/deliveries/${failed.id}/retry`, {})));
      expect(answers.map((r) => r.status).sort()).toEqual([202, 409, 409, 409]);
      const retried = answers.find((r) => r.status === 202)!.body;
      expect(retried.id).toBe(failed.id);
      // Refusals about the moment say when to try again, and an Idempotency-Key does not keep one:
      // the same key is run, not refused again, once the attempt has ended.
      for (const r of answers.filter((a) => a.status === 409)) expect(r.headers['retry-after']).toBe('1');
      const busyKey = randomUUID();
      const busy = await post(admin, `/webhooks/${hook.id}/deliveries/${failed.id}/retry`, {}).set('Idempotency-Key', busyKey);
      expect([busy.status, busy.body.error.code, busy.headers['retry-after']]).toEqual([409, 'conflict', '1']);
      release();
      const done = await waitFor(async () => {
        const d = (await get(admin, `/webhooks/${hook.id}/deliveries`).expect(200)).body.deliveries.find((x: { id: string }) => x.id === failed.id);
        return d.status === 'succeeded' && d;
      }, 'the manual retry');
      expect(done.attempts).toBe(4);
      const retriedItem = JSON.parse(receiver.at(hook.path)[0].body).item.id;
      expect(receiver.at(hook.path).filter((r) => JSON.parse(r.body).item.id === retriedItem)).toHaveLength(4);
      const again = await post(admin, `/webhooks/${hook.id}/deliveries/${failed.id}/retry`, {}).set('Idempotency-Key', busyKey);
      expect([again.status, again.headers['idempotent-replayed']]).toEqual([202, undefined]);
      await waitFor(() => receiver.at(hook.path).filter((r) => JSON.parse(r.body).item.id === retriedItem).length === 5, 'the retry the key ran');
      expectError(await post(admin, `/webhooks/${hook.id}/deliveries/${hook.id}/retry`, {}), 404, 'not_found');
    });

    it('takes an Idempotency-Key on a manual retry: a retry of the request gets the first 202 again and the delivery is not attempted again', async () => {
      const hook = await register(admin, { events: ['item.created'] });
      await note().expect(201);
      const done = await succeeded(hook.id);
      const lease = async () => (await t.sql<{ lease_until: Date | null; updated_at: Date }>(`SELECT lease_until, updated_at FROM webhook_deliveries WHERE id = $1`, [done.id]))[0];
      const retry = () => post(admin, `/webhooks/${hook.id}/deliveries/${done.id}/retry`, {});
      const key = randomUUID();
      const first = await retry().set('Idempotency-Key', key).expect(202);
      await waitFor(async () => {
        const d = (await get(admin, `/webhooks/${hook.id}/deliveries/${done.id}`).expect(200)).body;
        return d.attempts === 2 && (await lease()).lease_until === null;
      }, 'the manual retry to end');
      const taken = await lease();
      // Without the key's replay this would be a second attempt (202, the lease taken again).
      const again = await retry().set('Idempotency-Key', key).expect(202);
      expect([again.headers['idempotent-replayed'], again.body]).toEqual(['true', first.body]);
      expect(await lease()).toEqual(taken);
      expect(receiver.at(hook.path)).toHaveLength(2);
      expectError(await post(admin, `/webhooks/${hook.id}/deliveries/${randomUUID()}/retry`, {}).set('Idempotency-Key', key), 409, 'conflict');
    });

    it('stores no body with a delivery: later attempts render it from the event, kept while a delivery of it is pending; without it, nothing is sent', async () => {
      const hook = await register(admin, { events: ['item.created'] });
      await note().expect(201);
      const done = await succeeded(hook.id);
      const row = async () =>
        (await t.sql<{ body: string | null; status: string; last_error: string | null }>(`SELECT body, status, last_error FROM webhook_deliveries WHERE id = $1`, [done.id]))[0];
      expect((await row()).body).toBeNull();
      const eventKept = async () => (await t.sql(`SELECT 1 FROM events WHERE id = $1`, [done.event_id])).length === 1;
      await t.sql(`UPDATE events SET created_at = now() - interval '8 days' WHERE id = $1`, [done.event_id]);
      // Pending (its next attempt an hour away), the delivery keeps its event past the retention period.
      await t.sql(`UPDATE webhook_deliveries SET status = 'pending', next_attempt_at = now() + interval '1 hour' WHERE id = $1`, [done.id]);
      await t.app.get(EventsJanitor).sweep();
      expect(await eventKept()).toBe(true);
      await t.sql(`UPDATE webhook_deliveries SET status = 'succeeded', next_attempt_at = NULL WHERE id = $1`, [done.id]);
      await t.app.get(EventsJanitor).sweep();
      expect(await eventKept()).toBe(false);

      // The event gone, an admin's retry has nothing to send: 409, the delivery left as it was.
      const refused = expectError(await post(admin, `/webhooks/${hook.id}/deliveries/${done.id}/retry`, {}), 409, 'conflict');
      expect(refused.message).toMatch(/no longer kept/);
      expect(await row()).toMatchObject({ status: 'succeeded' });
      // Made due meanwhile (a retry that raced the janitor), it fails with why, sending nothing.
      await t.sql(`UPDATE webhook_deliveries SET status = 'pending', next_attempt_at = now() - interval '1 hour' WHERE id = $1`, [done.id]);
      await t.app.get(WebhookSweeper).sweep();
      expect(await waitFor(async () => ((await row()).status === 'failed' ? await row() : undefined), 'the delivery given up')).toMatchObject({
        last_error: expect.stringMatching(/no longer kept/),
      });
      expect(receiver.at(hook.path)).toHaveLength(1);
      // A delivery stored with its body (before migration 3700) still sends that body.
      const stored = JSON.stringify({ event: 'item.created', item: { id: done.id, type: 'core.note' } });
      await t.sql(`UPDATE webhook_deliveries SET body = $2 WHERE id = $1`, [done.id, stored]);
      await post(admin, `/webhooks/${hook.id}/deliveries/${done.id}/retry`, {}).expect(202);
      const [, resent] = await waitFor(() => receiver.at(hook.path).length === 2 && receiver.at(hook.path), 'the stored body sent');
      expect(resent.body).toBe(stored);
      new Webhook(hook.secret).verify(resent.body, resent.headers as Record<string, string>);
    });

    it("takes a body of '' or 'null' (a revert of migration 3700 left them) for none: the event's is sent, and without the event the delivery fails with why", async () => {
      const hook = await register(admin, { events: ['item.created'] });
      await note().expect(201);
      const done = await succeeded(hook.id);
      const [first] = receiver.at(hook.path);
      const row = async () => (await t.sql<{ status: string; last_error: string | null }>(`SELECT status, last_error FROM webhook_deliveries WHERE id = $1`, [done.id]))[0];
      await t.sql(`UPDATE webhook_deliveries SET body = '' WHERE id = $1`, [done.id]);
      await post(admin, `/webhooks/${hook.id}/deliveries/${done.id}/retry`, {}).expect(202);
      const [, resent] = await waitFor(() => receiver.at(hook.path).length === 2 && receiver.at(hook.path), 'the body rendered from the event');
      expect(resent.body).toBe(first.body);
      // Its outcome recorded (and lease given back) before the row is changed under it: a record
      // written later would set the row succeeded again, and the sweep would find nothing due.
      await waitFor(async () => (await get(admin, `/webhooks/${hook.id}/deliveries/${done.id}`).expect(200)).body.attempts === 2, 'the retry recorded');

      await t.sql(`UPDATE webhook_deliveries SET body = 'null', status = 'pending', next_attempt_at = now() - interval '1 hour' WHERE id = $1`, [done.id]);
      await t.sql(`DELETE FROM events WHERE id = $1`, [done.event_id]);
      await t.app.get(WebhookSweeper).sweep();
      expect(await waitFor(async () => ((await row()).status === 'failed' ? await row() : undefined), 'the delivery given up')).toMatchObject({
        last_error: expect.stringMatching(/no longer kept/),
      });
      expect(receiver.at(hook.path)).toHaveLength(2);
    });

    it('does not count an admin\'s forced attempts against the retry schedule', async () => {
      const hook = await register(admin, { events: ['item.created'] });
      receiver.respond = (r) => (r.path === hook.path ? 503 : 200);
      await note().expect(201);
      const delivery = async () => (await get(admin, `/webhooks/${hook.id}/deliveries`).expect(200)).body.deliveries[0];
      const { id } = await firstAttempted(hook.id);
      // Three forced attempts, more than the schedule's two retries, with the scheduled one held off meanwhile.
      for (let forced = 1; forced <= 3; forced++) {
        await t.sql(`UPDATE webhook_deliveries SET next_attempt_at = now() + interval '1 hour' WHERE id = $1`, [id]);
        await post(admin, `/webhooks/${hook.id}/deliveries/${id}/retry`, {}).expect(202);
        await waitFor(async () => (await t.sql(`SELECT 1 FROM webhook_deliveries WHERE id = $1 AND attempts = $2 AND lease_until IS NULL`, [id, 1 + forced])).length === 1, 'the forced attempt');
      }
      expect(await delivery()).toMatchObject({ id, status: 'pending', attempts: 4 });
      // The schedule's two retries are still to come, then the delivery fails.
      await t.sql(`UPDATE webhook_deliveries SET next_attempt_at = now() WHERE id = $1`, [id]);
      const failed = await waitFor(async () => {
        const d = await delivery();
        return d.status === 'failed' && d;
      }, 'the scheduled retries');
      expect(failed.attempts).toBe(6);
      expect(receiver.at(hook.path)).toHaveLength(6);
    });

    it('records a forced retry that sends nothing (its webhook no longer subscribes) as no forced attempt', async () => {
      const hook = await register(admin, { events: ['item.created'] });
      receiver.respond = (r) => (r.path === hook.path ? 503 : 200);
      await note().expect(201);
      const { id } = await firstAttempted(hook.id);
      await t.http.patch(`/webhooks/${hook.id}`).set(bearer(admin)).send({ events: ['edge.*'] }).expect(200);
      await post(admin, `/webhooks/${hook.id}/deliveries/${id}/retry`, {}).expect(202);
      const row = await waitFor(async () => {
        const [r] = await t.sql<{ status: string; attempts: number; forced_attempts: number }>(`SELECT status, attempts, forced_attempts FROM webhook_deliveries WHERE id = $1`, [id]);
        return r.status === 'failed' && r;
      }, 'the retry given up');
      expect(row).toEqual({ status: 'failed', attempts: 1, forced_attempts: 0 });
    });

    it('drops a delivery not made within EVENT_RETENTION_DAYS (a disabled webhook\'s) with its event, unless an attempt holds it', async () => {
      const hook = await register(admin, { events: ['item.created'] });
      receiver.respond = (r) => (r.path === hook.path ? 503 : 200);
      await note().expect(201);
      const { id, event_id: eventId } = await firstAttempted(hook.id);
      await t.http.patch(`/webhooks/${hook.id}`).set(bearer(admin)).send({ disabled: true }).expect(200);
      await t.sql(`UPDATE events SET created_at = now() - interval '8 days' WHERE id = $1`, [eventId]);
      await t.sql(`UPDATE webhook_deliveries SET created_at = now() - interval '8 days', lease_until = now() + interval '1 minute' WHERE id = $1`, [id]);
      const kept = async () => [(await t.sql(`SELECT 1 FROM webhook_deliveries WHERE id = $1`, [id])).length, (await t.sql(`SELECT 1 FROM events WHERE id = $1`, [eventId])).length];
      await t.app.get(EventsJanitor).sweep();
      expect(await kept()).toEqual([1, 1]); // an attempt holds it
      await t.sql(`UPDATE webhook_deliveries SET lease_until = NULL WHERE id = $1`, [id]);
      await t.app.get(EventsJanitor).sweep();
      expect(await kept()).toEqual([0, 0]);
    });

    it('answers a retry of a disabled webhook\'s delivery 409 conflict, leaving the delivery as it was', async () => {
      const hook = await register(admin, { events: ['item.created'] });
      await note().expect(201);
      const done = await succeeded(hook.id);
      await t.http.patch(`/webhooks/${hook.id}`).set(bearer(admin)).send({ disabled: true }).expect(200);
      const refused = expectError(await post(admin, `/webhooks/${hook.id}/deliveries/${done.id}/retry`, {}), 409, 'conflict');
      expect(refused.message).toMatch(/disabled/);
      const [after] = (await get(admin, `/webhooks/${hook.id}/deliveries`).expect(200)).body.deliveries;
      expect(after).toMatchObject({ id: done.id, status: 'succeeded', attempts: 1, next_attempt_at: null });
      // Enabled again, it can be retried.
      await t.http.patch(`/webhooks/${hook.id}`).set(bearer(admin)).send({ disabled: false }).expect(200);
      await post(admin, `/webhooks/${hook.id}/deliveries/${done.id}/retry`, {}).expect(202);
      await waitFor(() => receiver.at(hook.path).length === 2, 'the retried attempt');
    });

    it('selects by events and type_filter (subtypes under parent.*), and a disabled webhook gets nothing', async () => {
      await post(admin, '/types', { name: 'acme.doc', schema: { type: 'object' } }).expect(201);
      await post(admin, '/types', { name: 'acme.doc.memo', parent: 'acme.doc', schema: { type: 'object' } }).expect(201);
      const typed = await register(admin, { events: ['item.*'], type_filter: ['acme.doc.*'] });
      const edgesOnly = await register(admin, { events: ['edge.created'] });
      const disabled = await register(admin, { disabled: true });
      const memo = (await post(admin, '/items', { type: 'acme.doc.memo', properties: {} }).expect(201)).body;
      await note().expect(201);
      await post(admin, '/edge-types', { name: 'acme.cites', source_types: ['*'], target_types: ['*'] }).expect(201);
      const other = (await note().expect(201)).body;
      await post(admin, '/edges', { type: 'acme.cites', source_id: memo.id, target_id: other.id }).expect(201);
      await waitFor(() => receiver.at(edgesOnly.path).length === 1, 'the edge event');
      await waitFor(() => receiver.at(typed.path).length === 1, 'the typed event');
      // Everything above was relayed in commit order before the edge event; give the relay one more pass.
      await note().expect(201);
      await waitFor(async () => (await t.sql(`SELECT 1 FROM events WHERE dispatched_at IS NULL`)).length === 0, 'the relay');
      expect(receiver.at(typed.path).map((r) => JSON.parse(r.body).item.type)).toEqual(['acme.doc.memo']);
      expect(JSON.parse(receiver.at(edgesOnly.path)[0].body)).toMatchObject({ event: 'edge.created', edge: { type: 'acme.cites', source_id: memo.id } });
      expect(receiver.at(disabled.path)).toHaveLength(0);
    });

    it('sends only what the registering credential may read, as of delivery, with unreadable extensions left out', async () => {
      const member = await createKey(t, admin, {
        label: 'reader',
        type_permissions: { 'core.note': 'read' },
        extension_permissions: { 'pub.*': 'read' },
      });
      const hook = await register(member.key, { events: ['item.created'] });
      await post(admin, '/items', { type: 'core.task', properties: { title: 'hidden' } }).expect(201);
      await note(admin, { extensions: { 'pub.info': { a: 1 }, 'secret.stuff': { b: 2 } } }).expect(201);
      const [req] = await waitFor(() => receiver.at(hook.path).length === 1 && receiver.at(hook.path), 'the readable event');
      expect(JSON.parse(req.body).item).toMatchObject({ type: 'core.note', extensions: { 'pub.info': { a: 1 } } });
      expect(req.body).not.toContain('secret.stuff');
      await t.http.delete(`/keys/${member.id}`).set(bearer(admin)).expect(200);
      await note().expect(201);
      await waitFor(async () => (await t.sql(`SELECT 1 FROM events WHERE dispatched_at IS NULL`)).length === 0, 'the relay');
      expect(receiver.at(hook.path)).toHaveLength(1); // revoked: nothing more, not even the core.task event
    });

    it('checks each retry against the registering credential again: narrowed, the body drops what it lost; revoked, no more attempts', async () => {
      const member = await createKey(t, admin, { label: 'narrowing', type_permissions: { 'core.note': 'read' }, extension_permissions: { 'pub.*': 'read' } });
      const hook = await register(member.key, { events: ['item.created'] });
      receiver.respond = (r) => (r.path === hook.path ? 500 : 200);
      await note(admin, { extensions: { 'pub.info': { a: 1 } } }).expect(201);
      await waitFor(() => receiver.at(hook.path).length === 1, 'the first attempt');
      await t.http.patch(`/keys/${member.id}`).set(bearer(admin)).send({ extension_permissions: {} }).expect(200);
      const [first, second] = await waitFor(() => receiver.at(hook.path).length === 2 && receiver.at(hook.path), 'the retry');
      expect(JSON.parse(first.body).item.extensions).toEqual({ 'pub.info': { a: 1 } });
      expect(JSON.parse(second.body).item.extensions ?? {}).not.toHaveProperty('pub.info');
      new Webhook(hook.secret).verify(second.body, second.headers as Record<string, string>);

      await t.http.delete(`/keys/${member.id}`).set(bearer(admin)).expect(200);
      const failed = await waitFor(async () => {
        const [d] = (await get(admin, `/webhooks/${hook.id}/deliveries`).expect(200)).body.deliveries;
        return d?.status === 'failed' && d;
      }, 'the delivery given up');
      expect(failed).toMatchObject({ attempts: 2, next_attempt_at: null, last_error: expect.stringContaining('may no longer receive') });
      expect(receiver.at(hook.path)).toHaveLength(2);
    });

    it('sends a retry whose webhook was PATCHed between its claim and its sending to the webhook as it is now, not as the claim read it', async () => {
      const hook = await register(admin, { events: ['item.created'] });
      const moved = `${hook.path}-moved`;
      receiver.respond = (r) => (r.path === hook.path ? 500 : 200);
      await note().expect(201);
      const [first] = await waitFor(() => receiver.at(hook.path).length === 1 && receiver.at(hook.path), 'the first attempt');
      const fanout = t.app.get(WebhookFanout);
      const recheck = fanout.recheck.bind(fanout);
      // The retry's claim has read the webhook; its checks run when the PATCH comes and is answered.
      let patched = false;
      const spy = jest.spyOn(fanout, 'recheck').mockImplementation(async (tenantId, eventId, ...rest) => {
        if (eventId === first.headers['x-svc-event-id'] && !patched) {
          patched = true;
          await t.http.patch(`/webhooks/${hook.id}`).set(bearer(admin)).send({ url: `${base}${moved}` }).expect(200);
        }
        return recheck(tenantId, eventId, ...rest);
      });
      try {
        await waitFor(() => receiver.at(moved).length === 1, 'the retry at the new URL');
      } finally {
        spy.mockRestore();
      }
      expect(receiver.at(hook.path)).toHaveLength(1);
      expect(receiver.at(moved)[0].headers['x-svc-event-id']).toBe(first.headers['x-svc-event-id']);
    });

    it('sends no retry of an event its webhook was PATCHed to no longer subscribe to, at its old URL or new: the delivery fails with why', async () => {
      const hook = await register(admin, { events: ['item.created'] });
      const moved = `/hook-${++path}`;
      receiver.respond = (r) => (r.path === hook.path ? 500 : 200);
      await note().expect(201);
      await waitFor(() => receiver.at(hook.path).length === 1, 'the first attempt');
      await t.http.patch(`/webhooks/${hook.id}`).set(bearer(admin)).send({ events: ['item.deleted'], url: `${base}${moved}` }).expect(200);
      const ended = await waitFor(async () => {
        const [d] = (await get(admin, `/webhooks/${hook.id}/deliveries`).expect(200)).body.deliveries;
        return d?.status === 'failed' && d;
      }, 'the delivery given up');
      expect(ended).toMatchObject({ event: 'item.created', attempts: 1, next_attempt_at: null, last_error: 'The webhook no longer subscribes to this event' });
      expect(receiver.at(hook.path)).toHaveLength(1);
      expect(receiver.at(moved)).toHaveLength(0);
    });

    it('keeps retrying an item.deleted delivery after the purged items\' type is deleted: type_filter and the credential\'s read see the type\'s parents as they were', async () => {
      await post(admin, '/types', { name: 'acme.shortlived', parent: 'core.note', schema: { type: 'object' } }).expect(201);
      const member = (await createKey(t, admin, { label: 'note-subtypes', type_permissions: { 'core.note.*': 'read' } })).key;
      const hooks = [await register(admin, { events: ['item.deleted'], type_filter: ['core.*'] }), await register(member, { events: ['item.deleted'] })];
      // The first attempts fail once the type is gone, so their retries come after it.
      let typeDeleted!: () => void;
      const failAfterDeletion = new Promise<number>((resolve) => (typeDeleted = () => resolve(500)));
      receiver.respond = (r) => (hooks.some((h) => h.path === r.path) && receiver.at(r.path).length === 1 ? failAfterDeletion : 200);
      const item = (await post(admin, '/items', { type: 'acme.shortlived', properties: { title: 'short-lived' } }).expect(201)).body;
      await post(admin, '/items/bulk_action', { action: 'purge', filter: { type: 'acme.shortlived' }, confirm: 'PURGE' }).expect(200);
      await waitFor(() => hooks.every((h) => receiver.at(h.path).length === 1), 'the first attempts');
      await t.http.delete('/types/acme.shortlived').set(bearer(admin)).expect(200);
      typeDeleted();
      const ended = await Promise.all(
        hooks.map((hook) =>
          waitFor(async () => {
            const [d] = (await get(admin, `/webhooks/${hook.id}/deliveries`).expect(200)).body.deliveries;
            return d?.status !== 'pending' && d;
          }, 'the retry'),
        ),
      );
      expect(ended.map(({ event, status, attempts, last_error }) => ({ event, status, attempts, last_error }))).toEqual([
        { event: 'item.deleted', status: 'succeeded', attempts: 2, last_error: null },
        { event: 'item.deleted', status: 'succeeded', attempts: 2, last_error: null },
      ]);
      for (const hook of hooks) expect(receiver.at(hook.path).map((r) => JSON.parse(r.body).item.id)).toEqual([item.id, item.id]);
    });

    it('item.created shows the edges its write created, as GET /items/{id} does', async () => {
      await post(admin, '/edge-types', { name: 'acme.refs', source_types: ['*'], target_types: ['*'] }).expect(201);
      const target = (await note().expect(201)).body;
      const hook = await register(admin, { events: ['item.created'] });
      const created = (await note(admin, { edges: { 'acme.refs': [target.id] } }).expect(201)).body;
      const fetched = (await get(admin, `/items/${created.id}`).expect(200)).body;
      expect(Object.values(fetched.edges).flat()).toHaveLength(1);
      const [req] = await waitFor(() => {
        const mine = receiver.at(hook.path).filter((r) => JSON.parse(r.body).item.id === created.id);
        return mine.length === 1 && mine;
      }, 'the item.created event');
      expect(JSON.parse(req.body).item.edges).toEqual(fetched.edges);
    });

    it('sends an item\'s outgoing edges only as GET /items/{id} shows them to the registering credential', async () => {
      await post(admin, '/edge-types', { name: 'secret.link', source_types: ['*'], target_types: ['*'] }).expect(201);
      const member = (await createKey(t, admin, { label: 'edge-blind', type_permissions: { 'core.note': 'write' } })).key;
      const memberHook = await register(member, { events: ['item.updated'] });
      const adminHook = await register(admin, { events: ['item.updated'] });
      const doc = (await post(admin, '/items', { type: 'core.document', properties: { title: 'unreadable' } }).expect(201)).body;
      const linked = (await note(admin, { edges: { 'secret.link': [doc.id] } }).expect(201)).body;
      await t.http.patch(`/items/${linked.id}`).set(bearer(admin)).send({ version: linked.version, properties: { title: 'linked' } }).expect(200);
      const bodyAt = async (path: string) => JSON.parse((await waitFor(() => receiver.at(path)[0], `the delivery at ${path}`)).body);
      const seenByMember = await bodyAt(memberHook.path);
      expect(seenByMember.item).toMatchObject({ id: linked.id, edges: {} });
      expect(JSON.stringify(seenByMember)).not.toContain(doc.id);
      expect((await get(member, `/items/${linked.id}`).expect(200)).body.edges).toEqual(seenByMember.item.edges);
      const seenByAdmin = await bodyAt(adminHook.path);
      expect(seenByAdmin.item.edges).toEqual({ 'secret.link': [doc.id] });
      expect((await get(admin, `/items/${linked.id}`).expect(200)).body.edges).toEqual(seenByAdmin.item.edges);
      expect(seenByAdmin).not.toHaveProperty('edge_targets');
    });

    it('keeps a webhook registered with an OAuth token to that token\'s scopes, though its client has more', async () => {
      const client = (await post(admin, '/auth/clients', { grant_types: ['client_credentials'], scope: 'core.note:read core.document:read' }).expect(201)).body;
      const token = (
        await t.http.post('/auth/oauth2/token').auth(client.client_id, client.client_secret).type('form')
          .send({ grant_type: 'client_credentials', scope: 'core.note:read' }).expect(200)
      ).body.access_token as string;
      const hidden = (await post(admin, '/items', { type: 'core.document', properties: { title: 'not for the token' } }).expect(201)).body;
      expectError(await get(token, `/items/${hidden.id}`), 404, 'item_not_found');
      const hook = await register(token, { events: ['item.created'] });
      const [row] = await t.sql<{ credential_id: string; credential_scopes: string[] }>(`SELECT credential_id, credential_scopes FROM webhooks WHERE id = $1`, [hook.id]);
      expect(row).toEqual({ credential_id: expect.stringMatching(new RegExp(`^client:${client.client_id}:[0-9a-f]{16}$`)), credential_scopes: ['core.note:read'] });
      await post(admin, '/items', { type: 'core.document', properties: { title: 'still not for the token' } }).expect(201);
      const visible = (await note(admin, { properties: { title: 'for the token' } }).expect(201)).body;
      await waitFor(() => receiver.at(hook.path).length >= 1, 'the note\'s delivery');
      await waitFor(async () => (await t.sql(`SELECT 1 FROM events WHERE dispatched_at IS NULL`)).length === 0, 'the relay');
      expect(receiver.at(hook.path).map((r) => JSON.parse(r.body).item.id)).toEqual([visible.id]);
    });

    it('delivers to a webhook registered with a token of a client that registered no scope, by that token\'s scopes', async () => {
      const client = (await post(admin, '/auth/clients', { grant_types: ['client_credentials'] }).expect(201)).body;
      expect(client.scope ?? '').toBe('');
      const token = (
        await t.http.post('/auth/oauth2/token').auth(client.client_id, client.client_secret).type('form')
          .send({ grant_type: 'client_credentials', scope: 'core.note:read' }).expect(200)
      ).body.access_token as string;
      const hook = await register(token, { events: ['item.created'] });
      await post(admin, '/items', { type: 'core.document', properties: { title: 'not for the token' } }).expect(201);
      const visible = (await note(admin, { properties: { title: 'for the scopeless client' } }).expect(201)).body;
      await waitFor(() => receiver.at(hook.path).length >= 1, 'the note\'s delivery');
      await waitFor(async () => (await t.sql(`SELECT 1 FROM events WHERE dispatched_at IS NULL`)).length === 0, 'the relay');
      expect(receiver.at(hook.path).map((r) => JSON.parse(r.body).item.id)).toEqual([visible.id]);
    });

    it('emits nothing for a change that rolled back', async () => {
      const hook = await register(admin);
      const before = await t.sql<{ n: string }>(`SELECT count(*) AS n FROM events`);
      // The item is inserted, then its edge to a missing item fails: the transaction rolls back.
      const res = await note(admin, { edges: { 'acme.cites': ['00000000-0000-4000-8000-000000000000'] } });
      expectError(res, 404, 'item_not_found');
      const bulk = await post(admin, '/items/bulk', { mode: 'create_only', items: [{ type: 'core.note', source_id: 'dup' }, { type: 'core.note', source_id: 'dup' }] }).expect(200);
      expect(bulk.body.results.map((r: { status: string }) => r.status)).toEqual(['created', 'error']);
      await waitFor(async () => (await t.sql(`SELECT 1 FROM events WHERE dispatched_at IS NULL`)).length === 0, 'the relay');
      const after = await t.sql<{ n: string }>(`SELECT count(*) AS n FROM events`);
      expect(Number(after[0].n)).toBe(Number(before[0].n) + 1); // the bulk's created item only
      await waitFor(() => receiver.at(hook.path).length === 1, 'the one delivery');
      expect(JSON.parse(receiver.at(hook.path)[0].body).item.source_id).toBe('dup');
    });

    it('emits nothing for a write that fails at its commit, after its event was recorded', async () => {
      const kept = (await note(admin).expect(201)).body;
      // Updates only, and of this item: its creation's event (or an earlier test's) may still be on its way when the hook is registered.
      const hook = await register(admin, { events: ['item.updated'] });
      const ofKept = () => receiver.at(hook.path).filter((r) => JSON.parse(r.body).item.id === kept.id);
      // A deferred check: the write has run to its end, its event recorded, when its commit fails.
      await t.sql(`CREATE FUNCTION refuse_doomed() RETURNS trigger LANGUAGE plpgsql AS $$
                     BEGIN IF NEW.properties->>'title' = 'doomed' THEN RAISE EXCEPTION 'doomed'; END IF; RETURN NULL; END $$`);
      await t.sql(`CREATE CONSTRAINT TRIGGER refuse_doomed AFTER INSERT OR UPDATE ON items DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION refuse_doomed()`);
      try {
        expectError(await note(admin, { properties: { title: 'doomed' } }), 500, 'internal_error');
        expectError(await t.http.patch(`/items/${kept.id}`).set(bearer(admin)).send({ version: 1, properties: { title: 'doomed' } }), 500, 'internal_error');
      } finally {
        await t.sql('DROP TRIGGER refuse_doomed ON items');
        await t.sql('DROP FUNCTION refuse_doomed()');
      }
      await t.http.patch(`/items/${kept.id}`).set(bearer(admin)).send({ version: 1, properties: { title: 'kept' } }).expect(200);
      await waitFor(() => ofKept().length === 1, 'the delivery of the write that committed');
      expect(await t.sql(`SELECT 1 FROM events WHERE payload->'item'->'properties'->>'title' = 'doomed'`)).toEqual([]);
      expect(ofKept().map((r) => JSON.parse(r.body).item.properties.title)).toEqual(['kept']);
    });

    it('takes up again an event whose relay died, sending only the deliveries not recorded', async () => {
      const kept = await register(admin, { events: ['item.created'] });
      const lost = await register(admin, { events: ['item.created'] });
      const item = (await note().expect(201)).body;
      await waitFor(() => receiver.at(kept.path).length === 1 && receiver.at(lost.path).length === 1, 'both first deliveries');
      const [event] = await t.sql<{ id: string }>(`SELECT id FROM events WHERE name = 'item.created' AND payload->'item'->>'id' = $1`, [item.id]);
      await waitFor(async () => (await t.sql(`SELECT 1 FROM events WHERE id = $1 AND dispatched_at IS NOT NULL`, [event.id])).length === 1, 'dispatched');
      // As if the relay had died after sending to both but recording only one: its lease has lapsed.
      await t.sql(`DELETE FROM webhook_deliveries WHERE webhook_id = $1`, [lost.id]);
      await t.sql(`UPDATE events SET dispatched_at = NULL, relay_lease_until = now() - interval '1 second' WHERE id = $1`, [event.id]);
      await waitFor(() => receiver.at(lost.path).length === 2, 'the delivery sent again');
      await waitFor(async () => (await t.sql(`SELECT 1 FROM events WHERE id = $1 AND dispatched_at IS NOT NULL`, [event.id])).length === 1, 'dispatched again');
      expect(receiver.at(lost.path)[1].headers['x-svc-event-id']).toBe(event.id);
      expect(receiver.at(kept.path)).toHaveLength(1);
      const rows = await t.sql<{ webhook_id: string }>(`SELECT webhook_id FROM webhook_deliveries WHERE event_id = $1 AND webhook_id = ANY($2::uuid[])`, [event.id, [kept.id, lost.id]]);
      expect(rows.map((r) => r.webhook_id).sort()).toEqual([kept.id, lost.id].sort());
    });

    it('loses nothing when Redis forgets the retry queue: the sweeper finds due deliveries in the table', async () => {
      const hook = await register(admin, { events: ['item.created'] });
      receiver.respond = (r) => (r.path === hook.path && receiver.at(hook.path).length === 1 ? 500 : 200);
      await note().expect(201);
      await waitFor(() => receiver.at(hook.path).length === 1, 'the first attempt');
      await waitFor(async () => (await t.sql(`SELECT 1 FROM webhook_deliveries d WHERE webhook_id = $1 AND attempts = 1`, [hook.id])).length === 1, 'the failure recorded');
      await clearRedisPrefix(t.config.REDIS_PREFIX); // the delayed Bull job is gone
      await waitFor(() => receiver.at(hook.path).length === 2, 'the swept retry');
      const [d] = (await get(admin, `/webhooks/${hook.id}/deliveries`).expect(200)).body.deliveries;
      await waitFor(async () => (await get(admin, `/webhooks/${hook.id}/deliveries`)).body.deliveries[0].status === 'succeeded', 'success');
      expect(d.event_id).toBe(receiver.at(hook.path)[1].headers['x-svc-event-id']);
    });

    it('records the other webhooks\' deliveries of an event whose webhook was deleted meanwhile, sending none twice', async () => {
      const keep = await register(admin, { events: ['item.created'] });
      const doomed = await register(admin, { events: ['item.created'] });
      const deleter = new Client({ connectionString: t.config.DATABASE_URL });
      await deleter.connect();
      try {
        // The deletion is under way (not committed) while the event is fanned out to both webhooks and their deliveries recorded.
        await deleter.query(`BEGIN; DELETE FROM webhooks WHERE id = '${doomed.id}'`);
        await note().expect(201);
        await waitFor(() => receiver.at(keep.path).length === 1 && receiver.at(doomed.path).length === 1, 'both first attempts');
        await waitFor(async () => (await t.sql(`SELECT 1 FROM pg_locks WHERE NOT granted`)).length > 0, 'the records waiting on the deletion');
        await deleter.query('COMMIT');
      } finally {
        await deleter.end();
      }
      const listed = await waitFor(async () => {
        const { deliveries } = (await get(admin, `/webhooks/${keep.id}/deliveries`).expect(200)).body;
        return deliveries.length === 1 && deliveries;
      }, 'the kept webhook\'s delivery recorded');
      expect(listed[0]).toMatchObject({ status: 'succeeded', event_id: receiver.at(keep.path)[0].headers['x-svc-event-id'] });
      expect(receiver.at(keep.path)).toHaveLength(1);
      expect(await t.sql(`SELECT 1 FROM webhook_deliveries WHERE webhook_id = $1`, [doomed.id])).toEqual([]);
    });

    it('a receiver that never answers does not hold up another webhook', async () => {
      const stuck = await register(admin, { events: ['item.created'] });
      const fine = await register(admin, { events: ['item.created'] });
      receiver.respond = (r) => (r.path === stuck.path ? 'hang' : 200);
      for (let i = 0; i < 20; i++) await note().expect(201);
      await waitFor(() => receiver.at(fine.path).length === 20, 'all 20 deliveries to the healthy webhook');
      // The stuck one was sent at most its concurrency limit of attempts at once.
      expect(receiver.at(stuck.path).length).toBeGreaterThan(0);
      expect(receiver.maxOpen.get(stuck.path)).toBeLessThanOrEqual(PER_WEBHOOK_CONCURRENCY);
      // Each of its attempts ends at WEBHOOK_TIMEOUT_MS (1 s here), recorded as such, with no status, and is retried.
      const timedOut = await waitFor(async () => {
        const { deliveries } = (await get(admin, `/webhooks/${stuck.id}/deliveries`).expect(200)).body;
        return deliveries.find((d: { attempts: number }) => d.attempts > 0);
      }, 'a timed-out attempt recorded');
      expect(timedOut).toMatchObject({ status: 'pending', last_status_code: null, last_error: 'timeout after 1000 ms' });
    });

    it('a 2xx whose body never ends completes the delivery (SPEC 6.3), once the timeout cuts the body off', async () => {
      const trickling = await register(admin, { events: ['item.created'] });
      receiver.respond = (r) => (r.path === trickling.path ? 'unfinished' : 200);
      await note().expect(201);
      const [delivery] = await waitFor(async () => {
        const { deliveries } = (await get(admin, `/webhooks/${trickling.id}/deliveries`).expect(200)).body;
        return deliveries.length === 1 && deliveries[0].status !== 'pending' && deliveries;
      }, 'the delivery settled');
      expect(delivery).toMatchObject({ status: 'succeeded', attempts: 1, last_status_code: 200, last_error: null });
      expect(receiver.at(trickling.path)).toHaveLength(1);
    });

    describe('from receivers that misbehave on the wire (raw sockets)', () => {
      const OK = 'HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n';
      const started: RawReceiver[] = [];
      afterAll(() => Promise.all(started.map((r) => r.stop())));

      /** A webhook for item.created at a raw receiver of its own that answers every request so. */
      async function rawHook(answer: (socket: Socket) => void) {
        const raw = new RawReceiver(answer);
        started.push(raw);
        const { id } = (await post(admin, '/webhooks', { url: await raw.start(), events: ['item.created'] }).expect(201)).body as { id: string };
        return { id, raw };
      }
      /** The webhook's one delivery, once it is no longer pending (after all its attempts, unless one succeeded). */
      const settled = (hookId: string) =>
        waitFor(async () => {
          const { deliveries } = (await get(admin, `/webhooks/${hookId}/deliveries`).expect(200)).body;
          return deliveries.length === 1 && deliveries[0].status !== 'pending' && deliveries[0];
        }, 'the delivery settled');
      const remove = (hooks: Array<{ id: string }>) => Promise.all(hooks.map((h) => t.http.delete(`/webhooks/${h.id}`).set(bearer(admin)).expect(200)));

      it('takes a final status as the answer whatever then becomes of its body (reset, framed wrongly, never sent): a 2xx succeeds at once, another keeps its status; headers that do not parse are no answer', async () => {
        const hooks = {
          noBody: await rawHook((s) => s.write('HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n')),
          reset: await rawHook((s) => {
            s.write('HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nabc');
            setTimeout(() => s.resetAndDestroy(), 50);
          }),
          lengthAndChunked: await rawHook((s) => s.write('HTTP/1.1 200 OK\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n')),
          noContentWithBody: await rawHook((s) => s.write('HTTP/1.1 204 No Content\r\nContent-Length: 5\r\n\r\nhello')),
          errorThenReset: await rawHook((s) => {
            s.write('HTTP/1.1 500 Boom\r\nContent-Length: 100\r\n\r\nabc');
            setTimeout(() => s.resetAndDestroy(), 50);
          }),
        };
        await note().expect(201);
        const outcome = async ({ id, raw }: { id: string; raw: RawReceiver }) => {
          const d = await settled(id);
          return { status: d.status, attempts: d.attempts, code: d.last_status_code, error: d.last_error, posts: raw.posts };
        };
        const succeeded = (code: number) => ({ status: 'succeeded', attempts: 1, code, error: null, posts: 1 });
        expect(await outcome(hooks.noBody)).toEqual(succeeded(200));
        expect(await outcome(hooks.reset)).toEqual(succeeded(200));
        expect(await outcome(hooks.noContentWithBody)).toEqual(succeeded(204));
        // WEBHOOK_RETRY_SCHEDULE is two retries here: three attempts, each recorded with the status that came.
        expect(await outcome(hooks.errorThenReset)).toEqual({ status: 'failed', attempts: 3, code: 500, error: 'HTTP 500', posts: 3 });
        // A header section the HTTP parser refuses (RFC 9112 6.3: a smuggling signal) gives no status, and is recorded as such.
        expect(await outcome(hooks.lengthAndChunked)).toEqual({
          status: 'failed',
          attempts: 3,
          code: null,
          error: 'the response headers did not parse (such as both Content-Length and Transfer-Encoding); no status was read',
          posts: 3,
        });
        await remove(Object.values(hooks));
      });

      it('takes no interim (1xx) status for an answer: one followed by silence times out, one followed by a final status is that status', async () => {
        const silent = await Promise.all(['102 Processing', '103 Early Hints', '199 Whatever'].map((status) => rawHook((s) => s.write(`HTTP/1.1 ${status}\r\n\r\n`))));
        const hinted = await rawHook((s) => s.write(`HTTP/1.1 103 Early Hints\r\nLink: </x>; rel=preload\r\n\r\n${OK}`));
        await note().expect(201);
        for (const { id, raw } of silent) {
          expect(await settled(id)).toMatchObject({ status: 'failed', attempts: 3, last_status_code: null, last_error: 'timeout after 1000 ms' });
          expect(raw.posts).toBe(3);
        }
        expect(await settled(hinted.id)).toMatchObject({ status: 'succeeded', attempts: 1, last_status_code: 200, last_error: null });
        expect(hinted.raw.posts).toBe(1);
        await remove([...silent, hinted]);
      });

      it('says why an unasked 100 Continue before a 200 fails: undici refuses it', async () => {
        const hook = await rawHook((s) => s.write(`HTTP/1.1 100 Continue\r\n\r\n${OK}`));
        await note().expect(201);
        expect(await settled(hook.id)).toMatchObject({ status: 'failed', attempts: 3, last_status_code: null, last_error: expect.stringContaining('sent 100 Continue unasked') });
        expect(hook.raw.posts).toBe(3);
        await remove([hook]);
      });

      it('closes idle connections a receiver asked to keep for days, once its webhook is deleted', async () => {
        const hook = await rawHook((s) => s.write('HTTP/1.1 200 OK\r\nContent-Length: 0\r\nKeep-Alive: timeout=100000\r\n\r\n'));
        await note().expect(201);
        expect(await settled(hook.id)).toMatchObject({ status: 'succeeded', last_status_code: 200 });
        expect([hook.raw.posts, hook.raw.open]).toEqual([1, 1]);
        await remove([hook]);
        // Bounded by the dispatcher's cap on idle time, not the receiver's hint.
        await waitFor(() => hook.raw.open === 0, 'the idle connection closed', 25_000);
      }, 40_000);
    });

    it('never sends plain http to a public address, though private targets are allowed: checked again at each attempt', async () => {
      const hook = await register(admin, { events: ['item.created'] });
      // What a name that re-resolves to a public address would reach (a literal, as no DNS answers here).
      await t.sql(`UPDATE webhooks SET url = 'http://1.1.1.1:4199/plain' WHERE id = $1`, [hook.id]);
      await note().expect(201);
      const [delivery] = await waitFor(async () => {
        const { deliveries } = (await get(admin, `/webhooks/${hook.id}/deliveries`).expect(200)).body;
        return deliveries.length === 1 && deliveries[0].attempts > 0 && deliveries;
      }, 'the attempt recorded');
      expect(delivery).toMatchObject({ last_status_code: null, last_error: 'refused: plain http to 1.1.1.1, a public address: use https' });
    });
  });
});

describe('webhook targets with private targets off', () => {
  let t: TestApp;
  let admin: string;

  beforeAll(async () => {
    t = await startApp({ WEBHOOK_ALLOW_PRIVATE_TARGETS: 'false', WEBHOOKS_MAX_PER_TENANT: '5', WEBHOOKS_MAX_PER_CREDENTIAL: '2' });
    admin = (await bootstrapAdmin(t)).key;
  });
  afterAll(() => t.close());

  it.each([
    'https://127.0.0.1/x',
    'https://10.1.2.3/x',
    'https://192.168.0.1/x',
    'https://169.254.169.254/latest/meta-data',
    'https://[::1]/x',
    'https://[::ffff:127.0.0.1]/x',
    'https://[fd00::1]/x',
    'https://100.64.0.1/x',
    'https://0.0.0.0/x',
    'https://localhost/x', // a name that resolves to loopback
    'http://93.184.216.34/x', // plain http
  ])('refuses %s', async (url) => {
    expect(badFields(await t.http.post('/webhooks').set(bearer(admin)).send({ url, events: ['*'] }))).toEqual(['url']);
  });

  it('accepts a public https address (registration does not connect)', async () => {
    await t.http.post('/webhooks').set(bearer(admin)).send({ url: 'https://93.184.216.34/hooks', events: ['*'] }).expect(201);
  });

  it('holds a PATCHed url to the same rules: no plain http, no private address', async () => {
    const hook = (await t.http.post('/webhooks').set(bearer(admin)).send({ url: 'https://93.184.216.34/hooks', events: ['*'] }).expect(201)).body;
    for (const url of ['http://93.184.216.34/hooks', 'https://127.0.0.1/x', 'https://localhost/x']) {
      expect(badFields(await t.http.patch(`/webhooks/${hook.id}`).set(bearer(admin)).send({ url }))).toEqual(['url']);
    }
    expect((await t.http.get(`/webhooks/${hook.id}`).set(bearer(admin)).expect(200)).body.url).toBe('https://93.184.216.34/hooks');
  });

  it('refuses at delivery a name that has come to resolve to a private address (DNS rebinding)', async () => {
    const receiver = new Receiver();
    const base = await receiver.start();
    try {
      const hook = (await t.http.post('/webhooks').set(bearer(admin)).send({ url: 'https://93.184.216.34/hooks', events: ['item.created'] }).expect(201)).body;
      // What a rebinding name looks like at delivery time: a host name that now resolves to loopback.
      await t.sql(`UPDATE webhooks SET url = $2 WHERE id = $1`, [hook.id, `${base.replace('127.0.0.1', 'localhost')}/rebound`]);
      await t.http.post('/items').set(bearer(admin)).send({ type: 'core.note', properties: { title: 'rebound' } }).expect(201);
      const [delivery] = await waitFor(async () => {
        const { body } = await t.http.get(`/webhooks/${hook.id}/deliveries`).set(bearer(admin)).expect(200);
        return body.deliveries[0]?.attempts > 0 && body.deliveries;
      }, 'the refused attempt');
      expect(delivery).toMatchObject({ status: 'pending', last_status_code: null });
      expect(delivery.last_error).toMatch(/not a public address/);
      expect(receiver.requests).toHaveLength(0);
    } finally {
      await receiver.stop();
    }
  });

  it('holds a tenant to WEBHOOKS_MAX_PER_TENANT registrations, whoever registers them, and creations at once cannot pass it together', async () => {
    const register = (key: string) => t.http.post('/webhooks').set(bearer(key)).send({ url: 'https://93.184.216.34/hooks', events: ['*'] });
    // A tenant of its own, so no other test's webhook counts; and two admin keys, which WEBHOOKS_MAX_PER_CREDENTIAL does not hold, so only the tenant's cap can refuse.
    const tenant = await createTenant(t, admin, 'capped');
    const colleague = (await createKey(t, tenant.key, { label: 'second admin', role: 'admin' })).key as string;
    const answers = await Promise.all([tenant.key, colleague, tenant.key, colleague, tenant.key, colleague, tenant.key].map(register));
    expect(answers.filter((r) => r.status === 201)).toHaveLength(5);
    for (const refused of answers.filter((r) => r.status !== 201)) expect(expectError(refused, 409, 'conflict').details).toEqual({ limit: 5 });
    expect((await t.http.get('/webhooks').set(bearer(tenant.key)).expect(200)).body.webhooks).toHaveLength(5);
    // Another tenant has its own.
    const other = await createTenant(t, admin);
    await register(other.key).expect(201);
    // Deleting one makes room for one.
    const [first] = (await t.http.get('/webhooks').set(bearer(tenant.key)).expect(200)).body.webhooks;
    await t.http.delete(`/webhooks/${first.id}`).set(bearer(colleague)).expect(200);
    await register(colleague).expect(201);
    expectError(await register(tenant.key), 409, 'conflict');
  });

  it('holds a credential that is not an admin\'s to WEBHOOKS_MAX_PER_CREDENTIAL, so that it cannot take the tenant\'s whole allowance', async () => {
    const tenant = await createTenant(t, admin, 'members');
    const register = (key: string) => t.http.post('/webhooks').set(bearer(key)).send({ url: 'https://93.184.216.34/hooks', events: ['*'], disabled: true });
    const member = (await createKey(t, tenant.key, { label: 'member', type_permissions: {} })).key as string;
    await register(member).expect(201);
    await register(member).expect(201);
    expect(expectError(await register(member), 409, 'conflict').details).toEqual({ limit: 2 });
    // Another member, and the tenant's admin, still have room.
    const colleague = (await createKey(t, tenant.key, { label: 'colleague', type_permissions: {} })).key as string;
    await register(colleague).expect(201);
    await register(tenant.key).expect(201);
    await register(tenant.key).expect(201);
  });
});

describe('a first attempt that takes a while', () => {
  const receiver = new Receiver();
  let t: TestApp;
  let admin: string;
  let base: string;

  beforeAll(async () => {
    base = await receiver.start();
    t = await startApp({ WEBHOOK_TIMEOUT_MS: '10000' });
    admin = (await bootstrapAdmin(t)).key;
  });
  afterAll(async () => {
    await t.close();
    await receiver.stop();
  });

  it('is listed as pending while the receiver keeps it waiting, then with its outcome', async () => {
    let answer!: (status: number) => void;
    receiver.respond = () => new Promise((resolve) => (answer = resolve));
    const hook = (await t.http.post('/webhooks').set(bearer(admin)).send({ url: `${base}/slow`, events: ['item.created'] }).expect(201)).body;
    await t.http.post('/items').set(bearer(admin)).send({ type: 'core.note', properties: { title: 'slow' } }).expect(201);
    const list = async (status: string) => (await t.http.get(`/webhooks/${hook.id}/deliveries?status=${status}`).set(bearer(admin)).expect(200)).body.deliveries;
    const [pending] = await waitFor(async () => (await list('pending')).length === 1 && list('pending'), 'the delivery listed while its attempt runs');
    expect(pending).toMatchObject({ status: 'pending', attempts: 0 });
    expect(receiver.requests).toHaveLength(1);
    answer(200);
    const [done] = await waitFor(async () => (await list('succeeded')).length === 1 && list('succeeded'), 'the outcome');
    expect(done).toMatchObject({ id: pending.id, status: 'succeeded', attempts: 1, last_status_code: 200 });
    expect(await list('pending')).toEqual([]);
    expect(receiver.requests).toHaveLength(1);
    await t.http.delete(`/webhooks/${hook.id}`).set(bearer(admin)).expect(200);
  });

  it('answers an admin retry 409 conflict while an attempt holds the delivery, and leaves its lease alone', async () => {
    let answer!: (status: number) => void;
    receiver.respond = (req) => (req.path === '/slow-retry' ? new Promise((resolve) => (answer = resolve)) : 200);
    const hook = (await t.http.post('/webhooks').set(bearer(admin)).send({ url: `${base}/slow-retry`, events: ['item.created'] }).expect(201)).body;
    await t.http.post('/items').set(bearer(admin)).send({ type: 'core.note', properties: { title: 'slow retry' } }).expect(201);
    const listed = async () => (await t.http.get(`/webhooks/${hook.id}/deliveries`).set(bearer(admin)).expect(200)).body.deliveries;
    const [running] = await waitFor(async () => (await listed()).length === 1 && listed(), 'the delivery listed while its attempt runs');
    const lease = async () => (await t.sql<{ lease_until: Date | null }>(`SELECT lease_until FROM webhook_deliveries WHERE id = $1`, [running.id]))[0].lease_until;
    const held = await lease();
    expect(held!.getTime()).toBeGreaterThan(Date.now());
    const retry = () => t.http.post(`/webhooks/${hook.id}/deliveries/${running.id}/retry`).set(bearer(admin)).send({});
    const refused = expectError(await retry(), 409, 'conflict');
    expect(refused.message).toMatch(/under way/);
    expect(await lease()).toEqual(held);
    expect(receiver.at('/slow-retry')).toHaveLength(1); // not sent a second time (the two attempts below are all)
    receiver.respond = () => 200;
    answer(200);
    await waitFor(async () => (await listed())[0].status === 'succeeded', 'the attempt\'s outcome');
    // Once it has ended, the delivery can be retried.
    await retry().expect(202);
    const [again] = await waitFor(async () => (await listed())[0].attempts === 2 && listed(), 'the retried attempt');
    expect(again.attempt_log.map((a: { attempt: number }) => a.attempt)).toEqual([1, 2]);
    expect(receiver.at('/slow-retry')).toHaveLength(2);
  });
});

describe('first attempts waiting in line when their webhook changes', () => {
  const receiver = new Receiver();
  let t: TestApp;
  /** Another instance, which does not deliver: the changes are made there, and heard by `t` through Redis. */
  let other: TestApp;
  let admin: string;
  let base: string;

  beforeAll(async () => {
    base = await receiver.start();
    // Attempts that hang end after 3 s: the changes below are made while the first ones hang.
    const settings = { WEBHOOK_TIMEOUT_MS: '3000', WEBHOOK_RETRY_SCHEDULE: '1s,1s', WEBHOOK_SWEEP_INTERVAL: '500ms' };
    t = await startApp(settings);
    other = await startApp({ ...settings, DATABASE_URL: t.databaseUrl, REDIS_PREFIX: t.config.REDIS_PREFIX, EVENT_DELIVERY_ENABLED: 'false' });
    admin = (await bootstrapAdmin(t)).key;
  });
  afterAll(async () => {
    await other?.app.close();
    await t?.close();
    await other?.close();
    await receiver.stop();
  });

  it('sends none of them to a webhook deleted, disabled or re-pointed, or whose credential was revoked, on another instance', async () => {
    await t.http.post('/types').set(bearer(admin)).send({ name: 'acme.backlog', schema: { type: 'object' } }).expect(201);
    const member = await createKey(t, admin, { label: 'backlog', type_permissions: { 'acme.*': 'read' } });
    const register = async (key: string, path: string) =>
      (await t.http.post('/webhooks').set(bearer(key)).send({ url: `${base}${path}`, events: ['item.created'], type_filter: ['acme.backlog'] }).expect(201)).body.id as string;
    const hooks = { deleted: await register(admin, '/deleted'), disabled: await register(admin, '/disabled'), moved: await register(admin, '/moved'), revoked: await register(member.key, '/revoked') };
    const old = ['/deleted', '/disabled', '/moved', '/revoked'];
    receiver.respond = (r) => (old.includes(r.path) ? 'hang' : 200);
    const items = Array.from({ length: 40 }, (_, i) => ({ type: 'acme.backlog', properties: { i } }));
    await t.http.post('/items/bulk').set(bearer(admin)).send({ mode: 'create_only', items }).expect(200);
    // Each webhook has its first PER_WEBHOOK_CONCURRENCY attempts hanging, and the rest waiting in line.
    await waitFor(() => old.every((path) => receiver.at(path).length === PER_WEBHOOK_CONCURRENCY), 'the first attempts under way');

    await other.http.delete(`/webhooks/${hooks.deleted}`).set(bearer(admin)).expect(200);
    await other.http.patch(`/webhooks/${hooks.disabled}`).set(bearer(admin)).send({ disabled: true }).expect(200);
    await other.http.patch(`/webhooks/${hooks.moved}`).set(bearer(admin)).send({ url: `${base}/moved-to` }).expect(200);
    await other.http.delete(`/keys/${member.id}`).set(bearer(admin)).expect(200);

    // The moved webhook's deliveries all reach its new URL: those that waited, and the retries of those that hung.
    await waitFor(() => new Set(receiver.at('/moved-to').map((r) => r.headers['x-svc-event-id'])).size === 40, 'every delivery at the new URL');
    const count = async (webhookId: string, status: string) =>
      Number((await t.sql<{ n: string }>(`SELECT count(*) AS n FROM webhook_deliveries WHERE webhook_id = $1 AND status = $2`, [webhookId, status]))[0].n);
    // The revoked credential's are given up; the disabled webhook's wait, due, for it to be enabled again.
    await waitFor(async () => (await count(hooks.revoked, 'failed')) === 40, 'the revoked credential\'s deliveries given up');
    await waitFor(async () => (await count(hooks.disabled, 'pending')) === 40, 'the disabled webhook\'s deliveries recorded');
    await waitFor(async () => (await t.sql(`SELECT 1 FROM events WHERE dispatched_at IS NULL`)).length === 0, 'every event dispatched');
    for (const path of old) expect([path, receiver.at(path).length]).toEqual([path, PER_WEBHOOK_CONCURRENCY]);
  });
});

describe('first attempts waiting in line when their webhook is disabled on an instance that still has Redis, while this one has lost it', () => {
  const receiver = new Receiver();
  let base: string;
  beforeAll(async () => {
    base = await receiver.start();
  });
  afterAll(() => receiver.stop());
  // Attempts that hang end after 3 s; the other instance does not deliver, and its Redis stays.
  const settings = { WEBHOOK_TIMEOUT_MS: '3000', WEBHOOK_RETRY_SCHEDULE: '1s,1s', WEBHOOK_SWEEP_INTERVAL: '500ms' };
  const at = appBehindProxy(['redis'], settings, [{ ...settings, EVENT_DELIVERY_ENABLED: 'false' }]);

  it('sends none of them: the change went unheard here, so nothing planned counts as unchanged', async () => {
    const { t, redis, others: [other] } = at;
    const admin = (await bootstrapAdmin(t)).key;
    const hook = (await t.http.post('/webhooks').set(bearer(admin)).send({ url: `${base}/outage`, events: ['item.created'] }).expect(201)).body.id as string;
    // The first attempts are held at the receiver until the change is made, then answered.
    let release!: () => void;
    const held = new Promise<number>((resolve) => (release = () => resolve(200)));
    receiver.respond = () => held;
    const items = Array.from({ length: 40 }, (_, i) => ({ type: 'core.note', properties: { title: `in line ${i}` } }));
    await t.http.post('/items/bulk').set(bearer(admin)).send({ mode: 'create_only', items }).expect(200);
    await waitFor(() => receiver.at('/outage').length === PER_WEBHOOK_CONCURRENCY, 'the first attempts under way');

    await redis.cut();
    await waitFor(async () => (await t.http.get('/health')).body.checks?.redis !== 'up', 'Redis lost here');
    await other.http.patch(`/webhooks/${hook}`).set(bearer(admin)).send({ disabled: true }).expect(200);
    release();

    // Those under way succeed; those waiting in line read the webhook, disabled, and wait for it.
    const count = async (status: string) =>
      Number((await t.sql<{ n: string }>(`SELECT count(*) AS n FROM webhook_deliveries WHERE webhook_id = $1 AND status = $2`, [hook, status]))[0].n);
    await waitFor(async () => (await count('succeeded')) === PER_WEBHOOK_CONCURRENCY && (await count('pending')) === 40 - PER_WEBHOOK_CONCURRENCY, 'every delivery recorded');
    expect(receiver.at('/outage').length).toBe(PER_WEBHOOK_CONCURRENCY);
    await redis.restore();
    await redisUp(t);
  });
});

describe('webhooks while Redis is away', () => {
  const receiver = new Receiver();
  let base: string;
  beforeAll(async () => {
    base = await receiver.start();
  });
  afterAll(() => receiver.stop());
  const at = appBehindProxy(['redis']);

  it('still delivers first attempts: the relay does not wait on the event streams\' Redis', async () => {
    const { t, redis } = at;
    const admin = (await bootstrapAdmin(t)).key;
    const hook = (await t.http.post('/webhooks').set(bearer(admin)).send({ url: `${base}/no-redis`, events: ['item.created'] }).expect(201)).body;
    await redis.cut();
    const items = [];
    for (let i = 0; i < 3; i++) items.push((await t.http.post('/items').set(bearer(admin)).send({ type: 'core.note', properties: { title: `while away ${i}` } }).expect(201)).body.id);
    const got = await waitFor(() => receiver.requests.filter((r) => r.path === '/no-redis').length === 3 && receiver.requests, 'the three deliveries');
    expect(got.map((r) => JSON.parse(r.body).item.id).sort()).toEqual([...items].sort());
    // Recorded just after the attempts.
    await waitFor(async () => (await t.http.get(`/webhooks/${hook.id}/deliveries?status=succeeded`).set(bearer(admin)).expect(200)).body.deliveries.length === 3, 'the three recorded');
    await redis.restore();
  });
});

describe('an instance that does not deliver (EVENT_DELIVERY_ENABLED=false)', () => {
  const receiver = new Receiver();
  const settings = { WEBHOOK_RETRY_SCHEDULE: '1s', WEBHOOK_SWEEP_INTERVAL: '500ms', WEBHOOK_TIMEOUT_MS: '1000' };
  let api: TestApp;
  let worker: TestApp | undefined;
  let admin: string;
  let base: string;

  beforeAll(async () => {
    base = await receiver.start();
    api = await startApp({ ...settings, EVENT_DELIVERY_ENABLED: 'false' });
    admin = (await bootstrapAdmin(api)).key;
  });
  afterAll(async () => {
    await worker?.close();
    await api.close();
    await receiver.stop();
  });

  const note = () => api.http.post('/items').set(bearer(admin)).send({ type: 'core.note', properties: { title: 'n' } }).expect(201);
  // The first test starts the delivering instance after its write; the others need it running, whichever runs alone.
  const startWorker = async () => (worker ??= await startApp({ ...settings, DATABASE_URL: api.databaseUrl, REDIS_PREFIX: api.config.REDIS_PREFIX }));

  it('takes writes, announces them on Redis, and leaves their delivery to an instance that delivers', async () => {
    const hook = (await api.http.post('/webhooks').set(bearer(admin)).send({ url: `${base}/split`, events: ['item.created'] }).expect(201)).body;
    const wakes = new Redis(REDIS_URL);
    const announced: string[] = [];
    await wakes.subscribe(`${api.config.REDIS_PREFIX}events:wake`);
    wakes.on('message', (channel: string) => announced.push(channel));
    try {
      const item = (await note()).body;
      await waitFor(() => announced.length > 0, 'the announcement of the commit');
      const [event] = await api.sql(`SELECT dispatched_at, relay_lease_until FROM events WHERE payload->'item'->>'id' = $1`, [item.id]);
      expect(event).toMatchObject({ dispatched_at: null, relay_lease_until: null });
    } finally {
      await wakes.quit();
    }
    expect(receiver.at('/split')).toEqual([]);
    await startWorker();
    await waitFor(() => receiver.at('/split').length === 1, 'the delivery, by the instance that delivers');
    // Its record is written just after the attempt.
    const listed = async () => (await api.http.get(`/webhooks/${hook.id}/deliveries`).set(bearer(admin)).expect(200)).body.deliveries;
    await waitFor(async () => (await listed()).length === 1, 'the delivery recorded');
    await note();
    await waitFor(() => receiver.at('/split').length === 2, 'the next write, delivered');
  });

  it('passes an admin retry to an instance that delivers', async () => {
    await startWorker();
    const hook = (await api.http.post('/webhooks').set(bearer(admin)).send({ url: `${base}/split-retry`, events: ['item.created'] }).expect(201)).body;
    receiver.respond = (r) => (r.path === '/split-retry' && receiver.at('/split-retry').length <= 2 ? 500 : 200);
    await note();
    const failed = await waitFor(async () => {
      const { body } = await api.http.get(`/webhooks/${hook.id}/deliveries`).query({ status: 'failed' }).set(bearer(admin)).expect(200);
      return body.deliveries[0];
    }, 'the failed delivery');
    await api.http.post(`/webhooks/${hook.id}/deliveries/${failed.id}/retry`).set(bearer(admin)).expect(202);
    await waitFor(async () => {
      const { body } = await api.http.get(`/webhooks/${hook.id}/deliveries`).query({ status: 'succeeded' }).set(bearer(admin)).expect(200);
      return body.deliveries.length === 1;
    }, 'the retried delivery, succeeded');
    expect(receiver.at('/split-retry')).toHaveLength(3);
  });

  it('takes the lease for an admin retry it passes on, so that retries at once are one 202 and the rest 409', async () => {
    await startWorker();
    const hook = (await api.http.post('/webhooks').set(bearer(admin)).send({ url: `${base}/split-race`, events: ['item.created'] }).expect(201)).body;
    let release!: () => void;
    const held = new Promise<number>((resolve) => (release = () => resolve(200)));
    receiver.respond = (r) => (r.path !== '/split-race' ? 200 : receiver.at('/split-race').length <= 2 ? 500 : held);
    await note();
    const failed = await waitFor(async () => {
      const { body } = await api.http.get(`/webhooks/${hook.id}/deliveries`).query({ status: 'failed' }).set(bearer(admin)).expect(200);
      return body.deliveries[0];
    }, 'the failed delivery');
    const retry = () => api.http.post(`/webhooks/${hook.id}/deliveries/${failed.id}/retry`).set(bearer(admin));
    const answers = await Promise.all(Array.from({ length: 4 }, retry));
    expect(answers.map((r) => r.status).sort()).toEqual([202, 409, 409, 409]);
    await waitFor(() => receiver.at('/split-race').length === 3, 'the retried attempt, held by the receiver');
    // Under way, it still holds the lease.
    expect((await retry()).status).toBe(409);
    release();
    const done = await waitFor(async () => {
      const { body } = await api.http.get(`/webhooks/${hook.id}/deliveries`).query({ status: 'succeeded' }).set(bearer(admin)).expect(200);
      return body.deliveries[0];
    }, 'the retried delivery, succeeded');
    expect(done.attempts).toBe(3);
    expect(receiver.at('/split-race')).toHaveLength(3);
  });
});
