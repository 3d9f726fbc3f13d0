/** Conditional GETs: whether a request's If-None-Match names an answer's entity tag. */

/**
 * RFC 9110 13.1.2: weak comparison (`W/"x"` and `"x"` match), `*` for any. Whatever
 * Cache-Control the request carries: its `no-cache` is addressed to caches, not to the origin,
 * and fetch() adds it to every request with a conditional header.
 */
export function namesEntityTag(header: string | undefined, etag: string): boolean {
  if (header === undefined) return false;
  if (header.trim() === '*') return true;
  const opaque = (tag: string) => tag.trim().replace(/^W\//, '');
  return header.split(',').some((tag) => opaque(tag) === opaque(etag));
}
