/**
 * SVC_OAUTH_REDIRECT_ALLOWLIST: where the connector bootstrap may send a user back to. Both the
 * list and the asked-for `redirect_uri` are normalised the same way before comparing (WHATWG
 * URL): scheme and host in lower case, the scheme's default port dropped, the path's dot
 * segments resolved. Fragments and user info are never allowed; path and query must then match
 * exactly.
 */
export function normalizeRedirect(uri: string): string | undefined {
  let url: URL;
  try {
    url = new URL(uri);
  } catch {
    return undefined;
  }
  if (url.hash || url.username || url.password || !['https:', 'http:'].includes(url.protocol)) return undefined;
  return url.href;
}

export function redirectAllowlist(config: string | undefined): Set<string> {
  return new Set(
    (config ?? '')
      .split(',')
      .map((entry) => normalizeRedirect(entry.trim()))
      .filter((u): u is string => u !== undefined),
  );
}
