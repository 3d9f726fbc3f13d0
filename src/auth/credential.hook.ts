/**
 * First step of the pipeline after the request id: when a request carries credentials, run the
 * bearer strategy and attach the Principal (or the reason it failed). It never rejects by itself:
 * the rate limiter after it needs to know the caller, and the BearerGuard decides per route. A
 * token that cannot be checked at all (PostgreSQL away) is answered by `answerCredentialError`,
 * after the rate limiter: that 503 carries the X-RateLimit-* headers too (SPEC 8.1).
 */
import { Injectable } from '@nestjs/common';
import type { FastifyRequest } from 'fastify';
import { AuthenticationFailure, BearerStrategy } from './bearer.strategy';

@Injectable()
export class CredentialHook {
  constructor(private readonly strategy: BearerStrategy) {}

  /**
   * A fastify onRequest hook. Only the Authorization header is a credential (SPEC 5.1), parsed
   * as passport-http-bearer does (`Bearer <token>`, the scheme in any case, one space), but
   * handed to this application's own strategy: passport's registry is process-wide, and two
   * instances in one process (the tests) would otherwise check each other's keys.
   */
  readonly onRequest = (req: FastifyRequest, _reply: unknown, done: (err?: Error) => void): void => {
    const authorization = req.headers.authorization;
    if (authorization === undefined) return done();
    const parts = authorization.split(' ');
    if (parts.length !== 2 || !/^Bearer$/i.test(parts[0]) || !parts[1]) {
      req.authError = 'unauthorized'; // malformed Authorization header
      return done();
    }
    this.strategy.validate(parts[1]).then(
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

/** A fastify onRequest hook, after the rate limiter: the failure of a token that could not be checked. */
export const answerCredentialError = (req: FastifyRequest, _reply: unknown, done: (err?: Error) => void): void => done(req.credentialError);
