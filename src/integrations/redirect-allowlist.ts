/**
 * SVC_OAUTH_REDIRECT_ALLOWLIST: where the connector bootstrap may send a user back to. Both the
 * list and the asked-for `redirect_uri` are normalised the same way before comparing (WHATWG
 * URL): scheme and host in lower case, the scheme's default port dropped, the path's dot
 * segments resolved. Fragments and user info are never allowed; path and query must then match
 * exactly.
 */
import { redactUrl } from '../common/startup-error';

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

/** The list's entries (blank ones, as around a trailing comma, skipped), each with its normal form if it has one. */
function entries(config: string | undefined): Array<{ entry: string; normalized: string | undefined }> {
  return (config ?? '')
    .split(',')
    .map((entry) => entry.trim())
    .filter(Boolean)
    .map((entry) => ({ entry, normalized: normalizeRedirect(entry) }));
}

export function redirectAllowlist(config: string | undefined): Set<string> {
  return new Set(entries(config).flatMap(({ normalized }) => (normalized ? [normalized] : [])));
}

/**
 * Why the configured list cannot be used, or undefined (checked at start-up, app-config.ts): an
 * entry that does not normalise would match no redirect_uri, and a list required but left with
 * no entry would refuse every /oauth/start, either without saying why.
 */
export function redirectAllowlistProblem(config: string | undefined, required: boolean): string | undefined {
  const all = entries(config);
  const bad = all.find(({ normalized }) => normalized === undefined);
  // A password in an entry is not repeated into the log.
  if (bad) return `has the entry ${JSON.stringify(redactUrl(bad.entry))}, which is not an http(s) URL without a fragment or user info`;
  if (required && !all.length) return 'is required when NODE_ENV=production: list at least one redirect_uri';
  return undefined;
}
