/**
 * Which bucket a request counts against and how big it is (SPEC 8.1). Pure, so it is unit
 * tested on its own; `path` is the path the request was routed by (rate-limit.hook.ts).
 *
 * - one bucket per caller (key id, or client IP before authentication, an IPv6 one per /64:
 *   client-address.ts) per first path segment;
 * - reads (GET, HEAD, OPTIONS) get twice the base limit, in a bucket of their own;
 * - `/keys`, the account page's key form (`POST /auth/keys`), the token endpoints and the
 *   password forms (sign-in, sign-up, the device page's consent) are capped at TIGHT_LIMIT, and
 *   below the base however low it is, because they are where credentials are minted or guessed;
 * - the token endpoints' tight cap is `tokenRequestRule`, counted by the provider once it has
 *   read the form (src/oidc/token-rate-limit.ts), since only then can it tell a device's poll from
 *   the rest: a device polling at its interval must never be refused with a 429 (RFC 8628 3.5
 *   gives it authorization_pending, slow_down, access_denied and expired_token only), and its
 *   polls are limited per device code instead. This hook counts every request there too, per IP,
 *   at the base limit: what an address sends there at all;
 * - open client registration (RFC 7591: anyone may register, and a client is a row kept until an
 *   admin deletes it, with a secret minted) is capped at TIGHT_LIMIT per address too (RFC 7591 3
 *   names rate limits against exactly this);
 * - so is the device page (`GET /auth/device`, twice TIGHT_LIMIT as a read): given a `user_code`
 *   it looks the code up, and user codes are short (`XXX-XXXX`, SPEC 5.5, about 30 bits), so
 *   lookups are what RFC 8628 5.1 asks to limit; at the base read limit an address could try
 *   864,000 codes a day;
 * - the token endpoints and the password forms count per client IP whatever credential the
 *   request carries: what is guessed there (passwords, client secrets, codes) is not the
 *   caller's credential, so holding several keys must not multiply the guesses an address gets;
 * - so does the key form: its caller is the account pages' signed-in user, known by a cookie the
 *   route checks after the limit, not by a bearer key. A key sent along is not that caller, so
 *   counting per key would give a browser a fresh bucket of mints with every key it holds; the
 *   address is the one caller the limit can tell;
 * - the OAuth protocol endpoints (token, revocation, introspection, registration, device
 *   authorization, userinfo) answer a 429 in RFC 6749's error form, which their clients parse.
 *   A client authenticating with HTTP Basic counts like any caller without a valid token, per
 *   IP: its id is not verified before the limit, so a bucket of its own would let a made-up id
 *   open a fresh one with each request.
 * - the browser pages (sign-in, sign-up, consent, device, account pages and their forms) answer a
 *   429 as a page to a browser asking for HTML (rate-limit.hook.ts): a browser shows JSON raw.
 */
export const TIGHT_LIMIT = 30;
/** The tight limit for a base: at most TIGHT_LIMIT, and below the base however low it is set (SPEC 8.1). */
export const tightLimit = (baseLimit: number) => Math.max(1, Math.min(TIGHT_LIMIT, baseLimit - 1));
const READ_METHODS = new Set(['GET', 'HEAD', 'OPTIONS']);
// Case-insensitive like the routing (app.factory.ts), so `/AUTH/TOKEN` cannot dodge the tight cap,
// and with any number of trailing slashes, which oidc-mount.ts drops before it matches the provider's paths.
const TOKEN_PATHS = /^\/auth\/(token|oauth2\/token|device\/token)\/*$/i;
const PASSWORD_FORMS = /^\/auth\/(sign-in|sign-up|device\/consent)\/*$/i;
const OAUTH_ENDPOINTS = /^\/auth\/(token|userinfo|device\/token|oauth2\/(token|revoke|introspect|register|userinfo))\/*$/i;
const ACCOUNT_KEY_FORM = /^\/auth\/keys\/*$/i;
const REGISTRATION = /^\/auth\/oauth2\/register\/*$/i;
/** The writes capped at the tight limit per client address, each in a bucket of its own (see the header). */
const TIGHT_WRITES_PER_IP: ReadonlyArray<readonly [RegExp, string]> = [
  [PASSWORD_FORMS, 'auth-password'],
  [REGISTRATION, 'auth-register'],
  [ACCOUNT_KEY_FORM, 'auth-keys'],
];
/**
 * The browser pages and the forms they post, as routed (`/auth/grants/:id/revoke`): not the
 * provider's endpoints, nor the account routes that answer JSON only (`/auth/grants/:id`).
 */
const PAGES = /^\/auth(\/(sign-in|sign-up|select-account|consent|authorize|authorize\/decision|oauth2\/authorize|oauth2\/consent|logout|device\/consent|grants|grants\/:id\/revoke|sessions|sessions\/revoke|security|keys))?\/*$/i;
/** POST only: GET /auth/device is the user-code page. */
const DEVICE_AUTHORIZATION = /^\/auth\/device\/*$/i;

/** Whether a request (its path without the query) is to an endpoint whose clients read errors in RFC 6749's form, `{"error","error_description"}`. */
export function answersInOAuthForm(method: string, path: string): boolean {
  return OAUTH_ENDPOINTS.test(path) || (DEVICE_AUTHORIZATION.test(path) && !READ_METHODS.has(method));
}

export interface BucketRule {
  bucket: string;
  limit: number;
  /** An OAuth protocol endpoint (see the header). */
  oauth?: true;
  /** Counted per client IP whatever credential the request carries (see the header). */
  perIp?: true;
}

/**
 * The token endpoints' tight cap per client IP, for the requests the provider counts (see the
 * header): every one but a device's poll for a device code of its own.
 */
export function tokenRequestRule(baseLimit: number): BucketRule & { oauth: true; perIp: true } {
  return { bucket: 'auth-token:w', limit: tightLimit(baseLimit), oauth: true, perIp: true };
}

/** Whether `path` is a browser page or one of its forms (see the header); `path` as bucketFor takes it. */
export const isBrowserPage = (method: string, path: string): boolean => PAGES.test(path) || (DEVICE_AUTHORIZATION.test(path) && READ_METHODS.has(method.toUpperCase()));

export function bucketFor(method: string, path: string, baseLimit: number): BucketRule {
  const segment = (path.split('/')[1] ?? '').toLowerCase() || 'root';
  const read = READ_METHODS.has(method.toUpperCase());
  let limit = baseLimit;
  let name = segment;
  let perIp = false;
  const tightWrite = read ? undefined : TIGHT_WRITES_PER_IP.find(([pattern]) => pattern.test(path));
  const codeLookup = read && DEVICE_AUTHORIZATION.test(path);
  if (TOKEN_PATHS.test(path)) {
    // Every request, device polls included, at the base limit; the tight cap is tokenRequestRule's.
    name = 'auth-token-all';
    perIp = true;
  } else if (tightWrite || codeLookup) {
    name = tightWrite ? tightWrite[1] : 'auth-device';
    limit = tightLimit(baseLimit);
    perIp = true;
  } else if (segment === 'keys') {
    limit = tightLimit(baseLimit);
  }
  const oauth = answersInOAuthForm(method, path);
  return {
    bucket: `${name}:${read ? 'r' : 'w'}`,
    limit: read ? limit * 2 : limit,
    ...(oauth ? { oauth } : {}),
    ...(perIp ? { perIp } : {}),
  };
}
