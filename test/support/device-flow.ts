/** A user connects a device-flow client through the real pages: its tokens, as the device polls them. */
import request from 'supertest';
import { storedTokenId } from '../../src/oidc/oidc-adapter';
import type { TestApp } from './app';
import { waitFor } from './wait';

export const DEVICE_GRANT = 'urn:ietf:params:oauth:grant-type:device_code';

/** Needs an app started with OAUTH_DEVICE_POLL_INTERVAL=1, so the poll after the answer is not a slow_down. */
export async function deviceTokens(t: TestApp, clientId: string, user: { email: string; password: string }, scopes: string[]): Promise<{ access_token: string; refresh_token: string }> {
  const device = (await t.http.post('/auth/device').type('form').send({ client_id: clientId, scope: scopes.join(' ') }).expect(200)).body;
  const agent = request.agent(t.url);
  const complete = new URL(device.verification_uri_complete);
  const page = await agent.get(complete.pathname + complete.search).expect(200);
  const field = (name: string) => new RegExp(`name="${name}" value="([^"]*)"`).exec(page.text)![1];
  const form = new URLSearchParams({ user_code: field('user_code'), csrf: field('csrf'), email: user.email, password: user.password, decision: 'approve' });
  for (const scope of scopes) form.append('scope', scope);
  await agent.post('/auth/device/consent').type('form').send(form.toString()).expect(200);
  return waitFor(async () => {
    const res = await t.http.post('/auth/device/token').type('form').send({ grant_type: DEVICE_GRANT, device_code: device.device_code, client_id: clientId });
    return res.status === 200 && res.body;
  }, 'the device\'s tokens', 15_000, 1100);
}

/**
 * As if the device's poll interval had passed since its last poll: its last poll moved that far
 * back, where the test would otherwise sleep the interval away.
 */
export async function pollIntervalPassed(t: TestApp, deviceCode: string): Promise<void> {
  await t.sql(`UPDATE oauth_device_polls SET last_poll = last_poll - make_interval(secs => interval_s) WHERE device_code = $1`, [storedTokenId(deviceCode)]);
}
