/**
 * First step of the pipeline after the request id: when a request carries credentials, run the
 * bearer strategy and attach the Principal (or the reason it failed). It never rejects by itself:
 * the rate limiter after it needs to know the caller, and the BearerGuard decides per route. A
 * token that cannot be checked at all (PostgreSQL away) is answered by `answerCredentialError`,
 * after the rate limiter: that 503 carries the X-RateLimit-* headers too (SPEC 8.1).
 */
import { Injectable } from '@nestjs/common';
import type { FastifyRequest } from 'fastify';
import type { IncomingMessage } from 'node:http';
import { AuthenticationFailure, BearerStrategy } from './bearer.strategy';

@Injectable()
export class CredentialHook {
  constructor(private readonly strategy: BearerStrategy) {}

  /**
   * A fastify onRequest hook. Only the Authorization header is a credential (SPEC 5.1), parsed
   * by `bearerToken` and handed to this application's own strategy (not passport's): passport's registry is process-wide, and two
   * instances in one process (the tests) would otherwise check each other's keys.
   */
  readonly onRequest = (req: FastifyRequest, _reply: unknown, done: (err?: Error) => void): void => {
    if (req.headers.authorization === undefined) return done();
    const token = bearerToken(authorizationOnce(req.raw));
    if (!token) {
      req.authError = 'unauthorized'; // malformed Authorization header, or more than one
      return done();
    }
    this.strategy.validate(token).then(
      (principal) => {
        req.principal = principal;
        done();
      },
      (err: unknown) => {
        if (err instanceof AuthenticationFailure) req.authError = err.reason;
        else req.credentialError = err as Error;
        done();
      },
    );
  };
}

/** How many Authorization headers a request sent: Node keeps the first of several and drops the rest. */
export function authorizationCount(raw: IncomingMessage): number {
  let seen = 0;
  for (let i = 0; i < raw.rawHeaders.length; i += 2) if (raw.rawHeaders[i].length === 13 && raw.rawHeaders[i].toLowerCase() === 'authorization') seen++;
  return seen;
}

/**
 * The request's Authorization header if it sent exactly one: a proxy in front may have acted on
 * another copy than the one Node kept, so a request sending two is taken as sending none that
 * can be trusted (the API's bearer tokens, userinfo and the provider's endpoints alike).
 */
export function authorizationOnce(raw: IncomingMessage): string | undefined {
  return authorizationCount(raw) === 1 ? raw.headers.authorization : undefined;
}

/** The token of an Authorization header, `Bearer <token>` (the scheme in any case, then one or more spaces: RFC 6750 2.1); undefined when it is not one. */
export function bearerToken(authorization: string | undefined): string | undefined {
  return authorization === undefined ? undefined : /^Bearer +([^ ]+)$/i.exec(authorization)?.[1];
}

/** A fastify onRequest hook, after the rate limiter: the failure of a token that could not be checked. */
export const answerCredentialError = (req: FastifyRequest, _reply: unknown, done: (err?: Error) => void): void => done(req.credentialError);
