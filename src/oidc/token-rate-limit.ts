/**
 * The token endpoints' tight limit per client address (SPEC 8.1.4; `tokenRequestRule`,
 * rate-limit.policy.ts), counted here rather than by the rate-limit hook: only once the provider has
 * read the form can a device's poll be told from the rest. RFC 8628 3.5 gives a polling device
 * `authorization_pending`, `slow_down`, `access_denied` and `expired_token` only, and standard
 * device clients give up on anything else; a few devices behind one address, each polling at the
 * interval it was given, used to fill the address's bucket and get 429s.
 *
 * So a poll for a device code the provider has issued to the client the request names is limited
 * per device code (its interval, and `slow_down` sooner: device-polling.ts), and counts nowhere
 * here. Every other request counts per address at the tight limit, before the client is
 * authenticated: what is guessed there is a client secret, a code, a refresh token or a device
 * code. A device code of another client does not exempt a request: a confidential client's device
 * codes are issued to its authenticated requests only, so one cannot be had to guess its secret
 * with. The hook still counts every request to these paths per address, at the base limit, but
 * for those refused here.
 *
 * The provider has no hook between reading the form and authenticating the client: the check is
 * put into its token endpoint's middleware, just before client authentication (pinned version;
 * the tests exercise it).
 */
import type Redis from 'ioredis';
import type { KoaContextWithOIDC, Provider } from 'oidc-provider';
import { addressBucket } from '../common/client-address';
import { giveBackPlace } from '../rate-limit/rate-limit.hook';
import { BucketRule, tokenRequestRule } from '../rate-limit/rate-limit.policy';
import { limitHeaders, RollingWindows, WindowState } from '../rate-limit/rolling-window';
import { DEVICE_GRANT_TYPE } from './device-polling';

type Middleware = (ctx: KoaContextWithOIDC, next: () => Promise<void>) => Promise<void>;

/** The tight per-address window of the token endpoints, counted as the hook counts (rate-limit.hook.ts). */
export class TokenRequestLimit {
  private readonly windows: RollingWindows;
  readonly rule: BucketRule;

  constructor(redis: Redis, redisPrefix: string, baseLimit: number) {
    this.windows = new RollingWindows(redis, redisPrefix);
    this.rule = tokenRequestRule(baseLimit);
  }

  /** A place in `address`'s window, if one is free. */
  take(address: string): Promise<WindowState> {
    return this.windows.take(`ip:${addressBucket(address)}:${this.rule.bucket}`, this.rule.limit);
  }
}

/** Each provider's limit (the check is one middleware of the provider's shared token endpoint stack). */
const LIMITS = new WeakMap<Provider, TokenRequestLimit>();

/** The client a token request names: `client_id`, or the id of its HTTP Basic credentials. */
function namedClient(ctx: KoaContextWithOIDC): string | undefined {
  const param = (ctx.oidc.params as { client_id?: unknown }).client_id;
  if (typeof param === 'string') return param;
  const [scheme, value] = (ctx.get('authorization') || '').split(' ');
  if (scheme?.toLowerCase() !== 'basic' || !value) return undefined;
  const basic = Buffer.from(value, 'base64').toString('utf8');
  const colon = basic.indexOf(':');
  try {
    return colon === -1 ? undefined : decodeURIComponent(basic.slice(0, colon).replace(/\+/g, '%20'));
  } catch {
    return undefined;
  }
}

/** Whether the request is a device's poll for a device code issued to the client it names. */
async function pollOfOwnDeviceCode(ctx: KoaContextWithOIDC): Promise<boolean> {
  const params = ctx.oidc.params as { grant_type?: unknown; device_code?: unknown };
  if (params.grant_type !== DEVICE_GRANT_TYPE || typeof params.device_code !== 'string') return false;
  const client = namedClient(ctx);
  if (!client) return false;
  const code = await ctx.oidc.provider.DeviceCode.find(params.device_code, { ignoreExpiration: true });
  return code?.clientId === client;
}

const limitTokenRequests: Middleware = async (ctx, next) => {
  const limit = LIMITS.get(ctx.oidc.provider);
  if (!limit || (await pollOfOwnDeviceCode(ctx))) return next();
  const state = await limit.take(ctx.ip);
  const { limit: max } = limit.rule;
  ctx.set(limitHeaders(max, state));
  if (state.allowed) return next();
  // Nor at the base limit, which the address's device polls share: a refused request counts nowhere (SPEC 8.1).
  await giveBackPlace(ctx.req);
  // As the hook answers an OAuth endpoint (rate-limit.hook.ts).
  const retryAfter = Math.max(1, Math.ceil(state.msBeforeNext / 1000));
  ctx.set('Retry-After', String(retryAfter));
  ctx.status = 429;
  ctx.body = { error: 'rate_limited', error_description: `Rate limit of ${max} requests per minute exceeded; retry in ${retryAfter}s` };
};

/**
 * Puts the check into the token endpoint's middleware, before client authentication; to be called
 * before the provider is built (it takes its endpoints' middleware when it is constructed), then
 * `useTokenRequestLimit` for the provider built. The stack is the module's, shared by every
 * provider of the process: the check goes in once and looks its provider's limit up.
 */
export async function prepareTokenRequestLimit(): Promise<void> {
  const { default: stack } = (await import('oidc-provider/lib/actions/token.js' as string)) as { default: Middleware[] };
  const { default: clientAuth } = (await import('oidc-provider/lib/shared/client_auth.js' as string)) as { default: Middleware[] };
  if (stack.includes(limitTokenRequests)) return;
  const at = stack.indexOf(clientAuth[0]);
  if (at === -1) throw new Error('oidc-provider: the token endpoint no longer authenticates the client as the pinned version did');
  stack.splice(at, 0, limitTokenRequests);
}

export function useTokenRequestLimit(provider: Provider, limit: TokenRequestLimit | undefined): void {
  if (limit) LIMITS.set(provider, limit);
}
