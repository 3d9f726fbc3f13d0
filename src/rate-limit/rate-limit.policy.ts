/**
 * Which bucket a request counts against and how big it is (SPEC 8.1). Pure, so it is unit
 * tested on its own.
 *
 * - one bucket per caller (key id, or client IP before authentication) per first path segment;
 * - reads (GET, HEAD, OPTIONS) get twice the base limit, in a bucket of their own;
 * - `/keys`, the token endpoints and the password forms (sign-in, sign-up, the device page's
 *   consent) are capped at TIGHT_LIMIT, and below the base however low it is, because they are
 *   where credentials are minted or guessed;
 * - the OAuth protocol endpoints (token, revocation, introspection, registration, device
 *   authorization, userinfo) answer a 429 in RFC 6749's error form, which their clients parse,
 *   and count a client authenticating with HTTP Basic per client and address.
 */
export const TIGHT_LIMIT = 30;
/** The tight limit for a base: at most TIGHT_LIMIT, and below the base however low it is set (SPEC 8.1). */
export const tightLimit = (baseLimit: number) => Math.max(1, Math.min(TIGHT_LIMIT, baseLimit - 1));
const READ_METHODS = new Set(['GET', 'HEAD', 'OPTIONS']);
// Case-insensitive like the routing (app.factory.ts), so `/AUTH/TOKEN` cannot dodge the tight cap.
const TOKEN_PATHS = /^\/auth\/(token|oauth2\/token|device\/token)\/?$/i;
const PASSWORD_FORMS = /^\/auth\/(sign-in|sign-up|device\/consent)\/?$/i;
const OAUTH_ENDPOINTS = /^\/auth\/(token|userinfo|device\/token|oauth2\/(token|revoke|introspect|register|userinfo))\/?$/i;
/** POST only: GET /auth/device is the user-code page. */
const DEVICE_AUTHORIZATION = /^\/auth\/device\/?$/i;

export interface BucketRule {
  bucket: string;
  limit: number;
  /** An OAuth protocol endpoint (see the header). */
  oauth?: true;
}

export function bucketFor(method: string, path: string, baseLimit: number): BucketRule {
  const segment = (path.split('/')[1] ?? '').toLowerCase() || 'root';
  const read = READ_METHODS.has(method.toUpperCase());
  let limit = baseLimit;
  let name = segment;
  if (TOKEN_PATHS.test(path)) {
    name = 'auth-token';
    limit = tightLimit(baseLimit);
  } else if (PASSWORD_FORMS.test(path) && !read) {
    name = 'auth-password';
    limit = tightLimit(baseLimit);
  } else if (segment === 'keys') {
    limit = tightLimit(baseLimit);
  }
  const oauth = OAUTH_ENDPOINTS.test(path) || (DEVICE_AUTHORIZATION.test(path) && !read);
  return { bucket: `${name}:${read ? 'r' : 'w'}`, limit: read ? limit * 2 : limit, ...(oauth ? { oauth } : {}) };
}

/** The client id of an HTTP Basic client authentication (RFC 6749 2.3.1: form-encoded), if there is one. */
export function basicClientId(authorization: string | undefined): string | undefined {
  const match = /^Basic ([A-Za-z0-9+/=]{1,1400})$/i.exec(authorization ?? '');
  if (!match) return undefined;
  const decoded = Buffer.from(match[1], 'base64').toString('utf8');
  const colon = decoded.indexOf(':');
  if (colon < 1) return undefined;
  try {
    return decodeURIComponent(decoded.slice(0, colon).replace(/\+/g, ' '));
  } catch {
    return undefined;
  }
}
