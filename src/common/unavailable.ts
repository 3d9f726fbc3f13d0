/**
 * Errors that are not the service's bug, after which the client may send the same request
 * again: it changed nothing, as a write is one transaction, which the error rolled back.
 */

/** The Retry-After of every 503 `service_unavailable`: a dependency away, or an instance shutting down. */
export const UNAVAILABLE_RETRY_AFTER_SECONDS = '2';

/**
 * PostgreSQL SQLSTATEs: connection exceptions (08), the server shutting down or starting (57P0x),
 * too many connections, and a session ended for sitting idle in its transaction (25P03: this
 * process stalled past twice the statement timeout, pg-guards.ts).
 */
const PG_CODES = /^(08...|57P0[123]|53300|25P03)$/;
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
  // TypeORM, when a transaction's connection was ended under it (terminated, or idle too long):
  // its query runner lets the connection go at the connection's error, and the next statement,
  // or the COMMIT, which is then never sent, says so.
  /^Database connection provided by a query runner was already released/,
  /^Query runner already released/,
  // pg, for a client whose connection failed before its user listened (pg-guards.ts).
  /^Client has encountered a connection error and is not queryable$/,
];

/**
 * PostgreSQL SQLSTATEs of a transaction that lost to concurrent ones and was rolled back:
 * deadlock_detected, serialization_failure, lock_not_available. Answered 409 `conflict`: the
 * request changed nothing, and the same request may be sent again.
 */
const COLLISION_CODES = /^(40P01|40001|55P03)$/;

/**
 * query_canceled: a statement ran past DATABASE_STATEMENT_TIMEOUT_MS (or an operator cancelled
 * it). Most often the database is overloaded; a search whose words match most of a large tenant
 * can also take that long. Either way the request changed nothing (its transaction rolled back),
 * and it is answered 503 with Retry-After, not as the service's bug.
 */
const CANCELLED_CODE = '57014';

type Chained = { code?: unknown; message?: unknown; driverError?: unknown; cause?: unknown };

/** Whether `test` holds for the error or one it wraps (TypeORM's QueryFailedError wraps the driver's error). */
function inChain(err: unknown, test: (e: Chained) => boolean): boolean {
  for (let e = err as Chained | undefined, depth = 0; e && depth < 4; depth++) {
    if (test(e)) return true;
    e = (e.driverError ?? e.cause) as Chained | undefined;
  }
  return false;
}

/**
 * Whether a dependency (PostgreSQL, Redis) could not be reached, or dropped or stopped answering
 * on a connection. Answered 503 `service_unavailable` with Retry-After.
 */
export function isDependencyUnavailable(err: unknown): boolean {
  return inChain(
    err,
    (e) =>
      (typeof e.code === 'string' && (PG_CODES.test(e.code) || SOCKET_CODES.has(e.code))) ||
      (typeof e.message === 'string' && MESSAGES.some((m) => m.test(e.message as string))),
  );
}

export function isStatementCancelled(err: unknown): boolean {
  return inChain(err, (e) => e.code === CANCELLED_CODE);
}

/** Whether an error is the database's, not the service's: unreachable, or a statement it cancelled. Answered 503. */
export const isDatabaseTrouble = (err: unknown): boolean => isDependencyUnavailable(err) || isStatementCancelled(err);

export function isWriteCollision(err: unknown): boolean {
  return inChain(err, (e) => typeof e.code === 'string' && COLLISION_CODES.test(e.code));
}

/** unique_violation: the row would take a key another holds (a taken email, label, source): the caller's conflict, to answer as such. */
export const isUniqueViolation = (err: unknown): boolean => inChain(err, (e) => e.code === '23505');

/** lock_not_available: a lock wait ran past `lock_timeout`. */
export const isLockNotAvailable = (err: unknown): boolean => inChain(err, (e) => e.code === '55P03');
