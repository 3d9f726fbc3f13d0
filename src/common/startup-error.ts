/** A failure at start-up that deserves one line to the operator rather than a stack trace. */
export class StartupError extends Error {}

export function redactUrl(raw: string): string {
  try {
    const url = new URL(raw);
    if (url.password) url.password = '***';
    return url.toString();
  } catch {
    return '<unparseable url>';
  }
}
