/**
 * The device flow's polling rules, which oidc-provider leaves to the service (RFC 8628 3.2, 3.5):
 * the device authorization response gets `interval` and the SPEC's verification URIs
 * (`/auth/device`, with `?user_code=` for the complete one); a token request for a device code
 * that comes sooner than the interval after the last one is 400 `slow_down`, and the interval
 * grows by 5 seconds. Every poll of the code's own client sets the pace, a refused one too (a
 * client told to slow down waits the new interval from then, RFC 8628 3.5); another client's
 * poll of the code does not.
 */
import type { KoaContextWithOIDC, Provider } from 'oidc-provider';
import type { DataSource } from 'typeorm';
import { storedTokenId } from './oidc-adapter';
import { providerInternals } from './provider-internals';

export const DEVICE_GRANT_TYPE = 'urn:ietf:params:oauth:grant-type:device_code';
const SLOW_DOWN_STEP = 5;

export async function installDevicePolling(provider: Provider, db: DataSource, baseUrl: string, intervalSeconds: number): Promise<void> {
  const { errors } = await import('oidc-provider');
  const handlers = (await providerInternals(provider)).grantTypeHandlers;
  const poll = handlers.get(DEVICE_GRANT_TYPE)!;
  handlers.set(DEVICE_GRANT_TYPE, async (ctx, next) => {
    const deviceCode = (ctx.oidc.params as { device_code?: string }).device_code;
    // Only the code's own client's polls count: another client's poll of it, or a code that does
    // not exist, is the provider's invalid_grant, and would otherwise slow the device down (every
    // poll sets the pace) or leave a row per made-up code.
    const code = typeof deviceCode === 'string' ? await provider.DeviceCode.find(deviceCode, { ignoreExpiration: true }) : undefined;
    if (code?.clientId === ctx.oidc.client?.clientId && (await tooSoon(db, deviceCode!, intervalSeconds))) {
      throw new errors.SlowDown(`poll at most every ${intervalSeconds} seconds plus 5 for each slow_down`);
    }
    return poll(ctx, next);
  });
  provider.use(async (ctx: KoaContextWithOIDC, next: () => Promise<void>) => {
    await next();
    const body = ctx.body as { user_code?: string; verification_uri?: string; verification_uri_complete?: string; interval?: number } | undefined;
    if (ctx.oidc?.route === 'device_authorization' && body?.user_code) {
      body.verification_uri = `${baseUrl}/auth/device`;
      body.verification_uri_complete = `${baseUrl}/auth/device?user_code=${encodeURIComponent(body.user_code)}`;
      body.interval = intervalSeconds;
    }
  });
}

/** Records the poll, and whether it came too soon, in which case the interval grows too. */
async function tooSoon(db: DataSource, deviceCode: string, intervalSeconds: number): Promise<boolean> {
  // Keyed like the device code's own row: by digest, so the table holds no usable code.
  const key = storedTokenId(deviceCode);
  return db.transaction(async (m) => {
    await m.query(`INSERT INTO oauth_device_polls (device_code, interval_s, last_poll) VALUES ($1, $2, 'epoch') ON CONFLICT DO NOTHING`, [key, intervalSeconds]);
    const [poll]: Array<{ interval_s: number; too_soon: boolean }> = await m.query(
      `SELECT interval_s, clock_timestamp() - last_poll < make_interval(secs => interval_s) AS too_soon FROM oauth_device_polls WHERE device_code = $1 FOR UPDATE`,
      [key],
    );
    await m.query(
      `UPDATE oauth_device_polls SET last_poll = clock_timestamp()${poll.too_soon ? `, interval_s = interval_s + ${SLOW_DOWN_STEP}` : ''} WHERE device_code = $1`,
      [key],
    );
    return poll.too_soon;
  });
}
