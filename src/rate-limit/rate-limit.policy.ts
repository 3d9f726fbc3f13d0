/**
 * Which bucket a request counts against and how big it is (SPEC 8.1). Pure, so it is unit
 * tested on its own.
 *
 * - one bucket per caller (key id, or client IP before authentication) per first path segment;
 * - reads (GET, HEAD, OPTIONS) get twice the base limit, in a bucket of their own;
 * - `/keys`, the token endpoints and the password forms (sign-in, sign-up, the device page's
 *   consent) are capped at TIGHT_LIMIT whatever the base is, because they are where credentials
 *   are minted or guessed.
 */
export const TIGHT_LIMIT = 30;
const READ_METHODS = new Set(['GET', 'HEAD', 'OPTIONS']);
// Case-insensitive like the routing (app.factory.ts), so `/AUTH/TOKEN` cannot dodge the tight cap.
const TOKEN_PATHS = /^\/auth\/(token|oauth2\/token|device\/token)\/?$/i;
const PASSWORD_FORMS = /^\/auth\/(sign-in|sign-up|device\/consent)\/?$/i;

export interface BucketRule {
  bucket: string;
  limit: number;
}

export function bucketFor(method: string, path: string, baseLimit: number): BucketRule {
  const segment = (path.split('/')[1] ?? '').toLowerCase() || 'root';
  const read = READ_METHODS.has(method.toUpperCase());
  let limit = baseLimit;
  let name = segment;
  if (TOKEN_PATHS.test(path)) {
    name = 'auth-token';
    limit = Math.min(baseLimit, TIGHT_LIMIT);
  } else if (PASSWORD_FORMS.test(path) && !read) {
    name = 'auth-password';
    limit = Math.min(baseLimit, TIGHT_LIMIT);
  } else if (segment === 'keys') {
    limit = Math.min(baseLimit, TIGHT_LIMIT);
  }
  return { bucket: `${name}:${read ? 'r' : 'w'}`, limit: read ? limit * 2 : limit };
}
