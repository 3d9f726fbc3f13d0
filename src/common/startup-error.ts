/** A failure at start-up that deserves one line to the operator rather than a stack trace. */
export class StartupError extends Error {}

export function redactUrl(raw: string): string {
  try {
    const url = new URL(raw);
    if (url.password) url.password = '***';
    return url.toString();
  } catch {
    return maskPassword(raw);
  }
}

/**
 * The URL as written with the password (between `user:` and the last `@`) masked, for a URL
 * that may not parse: an unencoded `/`, `#` or `@` in the password is what often breaks one.
 */
export function maskPassword(raw: string): string {
  return raw.replace(/^([a-z][a-z\d+.-]*:\/\/[^/?#@:]*:).*@/is, '$1***@');
}
