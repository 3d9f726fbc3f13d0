/**
 * Logs (pino): the root logger, Nest's own logs through nestjs-pino, and one line per request
 * with a request id that is also returned as X-Request-Id. Credentials never reach the log:
 * the request line carries no headers, auth headers and cookies are redacted should anything
 * log them, secret-looking query parameters are masked, and the service's own secrets are
 * masked wherever in the URL they are sent.
 *
 * The request line is written here rather than by pino-http (nestjs-pino's default
 * middleware). pino-http builds two child loggers and three listeners per request even at
 * `silent`, and nestjs-pino then runs every request in an AsyncLocalStorage, which puts hooks
 * on every promise the process creates. Together that was 15-25% of the service's CPU on a
 * small search (README, "Logs"). Here a request costs its id, and its line only when the level
 * would print it. Logs written during a request do not carry its id by themselves; the one
 * that needs it, the unexpected error's, names it (exception.filter.ts).
 */
import type { FastifyReply, onRequestHookHandler } from 'fastify';
import { randomUUID } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import type { Params } from 'nestjs-pino';
import pino, { Level, Logger } from 'pino';
import type { AppConfig } from '../config/app-config';
import { API_KEY_PREFIX } from '../keys/key-secrets';
import { OAUTH_ACCESS_TOKEN_PREFIX, OAUTH_CLIENT_SECRET_PREFIX, OAUTH_REFRESH_TOKEN_PREFIX } from '../auth/principal';
import { SECRET_PREFIX as WEBHOOK_SECRET_PREFIX } from '../webhooks/signature';

const REQUEST_ID_RE = /^[A-Za-z0-9._-]{1,100}$/;
/**
 * A parameter whose (decoded) name contains one of these, in any letter case, is masked:
 * `access_token`, `api_key`, `apikey`, `auth`, `authorization`, `client_secret`, `passwd`, `pw`,
 * `sig`, `session_id`, … Broad on purpose: a masked harmless parameter costs a little debugging,
 * a key in clear is a leak (docs/operations.md lists them).
 */
const SECRET_PARAM_RE = /(token|secret|pass|pw|code|key|assertion|verifier|auth|bearer|credential|sig|session|cookie)/i;
/** The service's own secrets, masked under whatever name they are sent (`?q=svc_k1_…`, `?x=Bearer svc_at_…`). */
const OWN_SECRET_PREFIXES = [API_KEY_PREFIX, OAUTH_ACCESS_TOKEN_PREFIX, OAUTH_REFRESH_TOKEN_PREFIX, OAUTH_CLIENT_SECRET_PREFIX, WEBHOOK_SECRET_PREFIX];
const isOwnSecret = (text: string) => OWN_SECRET_PREFIXES.some((prefix) => text.includes(prefix));

const decoded = (segment: string): string => {
  try {
    return decodeURIComponent(segment);
  } catch {
    return segment;
  }
};

/**
 * The URL as it is logged: the service's own secrets masked in the path (a key pasted where an
 * id belongs, `/keys/svc_k1_…`) and in the query, and secret-looking query parameters masked.
 */
export function maskUrl(url: string): string {
  const q = url.indexOf('?');
  // An absolute-form request target (`GET http://user:password@host/…`) may carry user-info,
  // which ends at the authority's last `@` (a password may hold a raw one); so may an
  // authority-form one (`CONNECT user:password@host:443`).
  const path = (q < 0 ? url : url.slice(0, q))
    .replace(/^([a-z][a-z0-9+.-]*:\/\/)?[^/?#]*@/i, '$1[redacted]@')
    .split('/')
    .map((segment) => (isOwnSecret(decoded(segment)) ? '[redacted]' : segment))
    .join('/');
  return q < 0 ? path : `${path}?${maskQuery(url.slice(q + 1))}`;
}

function maskQuery(query: string): string {
  const masked = new URLSearchParams();
  for (const [name, value] of new URLSearchParams(query)) {
    // A secret sent as a bare `?svc_k1_…` is the parameter's name.
    if (isOwnSecret(name)) masked.append('[redacted]', '');
    else masked.append(name, SECRET_PARAM_RE.test(name) || isOwnSecret(value) ? '[redacted]' : value);
  }
  return masked.toString();
}

/** What a database error carries that quotes the data: the statement's values, PostgreSQL's `detail`. */
const QUOTED_DATA = ['parameters', 'detail'];

/**
 * Errors as pino's own serializer writes them, less the values of a failed statement: TypeORM's
 * QueryFailedError holds its `parameters` (item properties, emails, password hashes) and
 * PostgreSQL's `detail` (`Key (email)=(…) already exists`), at its top and in `driverError`.
 * The statement's text, with its placeholders, stays: it says which query failed.
 */
export function serializeError(err: unknown): unknown {
  const out = pino.stdSerializers.err(err as Error) as unknown;
  return isRecord(out) ? withoutQuotedData({ ...out, ...(isRecord(out.driverError) ? { driverError: withoutQuotedData({ ...out.driverError }) } : {}) }) : out;
}

const isRecord = (value: unknown): value is Record<string, unknown> => value !== null && typeof value === 'object';

function withoutQuotedData(copy: Record<string, unknown>): Record<string, unknown> {
  for (const key of QUOTED_DATA) if (key in copy) copy[key] = '[redacted]';
  return copy;
}

/** The root logger, writing to `destination` (stdout unless a test gives one). */
export function createLogger(config: Pick<AppConfig, 'LOG_LEVEL'>, destination?: pino.DestinationStream): Logger {
  const options: pino.LoggerOptions = {
    level: config.LOG_LEVEL,
    serializers: { err: serializeError },
    redact: {
      paths: ['req.headers.authorization', 'req.headers.cookie', 'req.headers["x-api-key"]', 'res.headers["set-cookie"]'],
      censor: '[redacted]',
    },
  };
  return destination ? pino(options, destination) : pino(options);
}

/**
 * nestjs-pino's parameters: Nest's logs go through `logger`, and its request middleware is
 * mounted on no route (requestLogging takes its place). nestjs-pino logs through a child that
 * pino-http makes of `logger`, which by default brings pino-http's own `err` serializer in place
 * of serializeError, and with it a failed statement's values; `wrapSerializers: false` keeps ours.
 */
export function loggerParams(logger: Logger): Params {
  return { pinoHttp: { logger, wrapSerializers: false }, forRoutes: [] };
}

/**
 * The caller's X-Request-Id when it is sane, else a new one: fastify's `genReqId`, so `request.id`.
 * Not one holding the service's own secret (a key pasted into the wrong header): it would be
 * logged and sent back in clear.
 */
export function requestId(req: IncomingMessage): string {
  const incoming = req.headers['x-request-id'];
  return typeof incoming === 'string' && REQUEST_ID_RE.test(incoming) && !isOwnSecret(incoming) ? incoming : randomUUID();
}

/** Answers whose 4xx is the protocol's normal course, not a client's mistake (markRoutine). */
const routine = new WeakSet<FastifyReply['raw']>();

/**
 * Logs a 4xx answer at info: a device polling until its user answers gets a 400
 * `authorization_pending` every few seconds (RFC 8628 3.5), which is no warning.
 */
export function markRoutine(res: FastifyReply['raw']): void {
  routine.add(res);
}

/**
 * 503 is a warning, not an error: a dependency away (logged once more, as such, by the exception
 * filter) or an instance refusing new streams while it shuts down, which every rolling restart does.
 */
function levelOf(res: FastifyReply['raw']): Level {
  if (res.statusCode >= 500) return res.statusCode === 503 ? 'warn' : 'error';
  return res.statusCode >= 400 && !routine.has(res) ? 'warn' : 'info';
}

/** How a log line names a request: the request line's fields, and a refusal's before routing. */
export function requestFields(req: IncomingMessage, id: string) {
  return { id, method: req.method, url: maskUrl(req.url ?? ''), remoteAddress: req.socket.remoteAddress };
}

/**
 * The first request hook: returns the request id as X-Request-Id, and logs the request once
 * its response is sent (or abandoned: "request aborted", at `warn` at least, with a null
 * statusCode when the client went away before the status was sent; an event stream whose client
 * left, "stream closed"), at `info`, `warn` for 4xx (routine ones aside), `error` for 5xx.
 */
export function requestLogging(logger: Logger): onRequestHookHandler {
  return (req, reply, done) => {
    const id = req.id;
    reply.header('X-Request-Id', id);
    if (logger.isLevelEnabled('error')) {
      const started = performance.now();
      const fields = requestFields(req.raw, id);
      const res = reply.raw;
      res.once('close', () => {
        const finished = res.writableFinished;
        // Until the headers are sent, statusCode is only what the handler meant to answer:
        // an abort before that is logged with none (null), at warn.
        const sent = res.headersSent;
        // An event stream ends when its client goes away: that is its normal end, not an abort.
        const streamed = sent && !finished && String(res.getHeader('content-type') ?? '').startsWith('text/event-stream');
        const byStatus = sent ? levelOf(res) : 'warn';
        const level = finished || streamed || byStatus === 'error' ? byStatus : 'warn';
        if (!logger.isLevelEnabled(level)) return;
        logger[level](
          {
            req: fields,
            res: { statusCode: sent ? res.statusCode : null },
            responseTime: Math.round(performance.now() - started),
          },
          finished ? 'request completed' : streamed ? 'stream closed' : 'request aborted',
        );
      });
    }
    done();
  };
}
