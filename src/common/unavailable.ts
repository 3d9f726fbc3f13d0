/**
 * Whether an error says that a dependency (PostgreSQL, Redis) could not be reached, or dropped
 * or stopped answering on a connection, rather than that the service has a bug. Such a request
 * is answered 503 `service_unavailable` with Retry-After: the client may retry it as it is.
 * Nothing it began stays done: a write is one transaction, which the broken connection rolled
 * back.
 */

/** PostgreSQL SQLSTATEs: connection exceptions (08), the server shutting down or starting (57P0x), too many connections. */
const PG_CODES = /^(08...|57P0[123]|53300)$/;
/** Node's socket errors. */
const SOCKET_CODES = new Set(['ECONNREFUSED', 'ECONNRESET', 'ETIMEDOUT', 'EPIPE', 'EHOSTUNREACH', 'ENETUNREACH', 'EAI_AGAIN']);
/** What pg, pg-pool and ioredis say when a connection is gone, cannot be had, or stopped answering. */
const MESSAGES = [
  /^Connection terminated/,
  /^timeout exceeded when trying to connect$/,
  /^Query read timeout$/,
  /^Connection is closed\.?$/,
  /^Redis is not connected/,
  /^Reached the max retries per request limit/,
];

export function isDependencyUnavailable(err: unknown): boolean {
  for (let e = err as { code?: unknown; message?: unknown; driverError?: unknown; cause?: unknown } | undefined, depth = 0; e && depth < 4; depth++) {
    if (typeof e.code === 'string' && (PG_CODES.test(e.code) || SOCKET_CODES.has(e.code))) return true;
    if (typeof e.message === 'string' && MESSAGES.some((m) => m.test(e!.message as string))) return true;
    e = (e.driverError ?? e.cause) as typeof e; // TypeORM's QueryFailedError wraps the driver's error
  }
  return false;
}
