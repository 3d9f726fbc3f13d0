/**
 * First step of the pipeline after the request id: when a request carries credentials, run the
 * bearer strategy and attach the Principal (or the reason it failed). It never rejects by itself:
 * the rate limiter after it needs to know the caller, and the BearerGuard decides per route.
 */
import { Injectable } from '@nestjs/common';
import type { FastifyReply, FastifyRequest } from 'fastify';
import passport from 'passport';
import { AuthenticationFailure } from './bearer.strategy';
import type { Principal } from './principal';

@Injectable()
export class CredentialHook {
  /** A fastify onRequest hook. */
  readonly onRequest = (req: FastifyRequest, reply: FastifyReply, done: (err?: Error) => void): void => {
    const authorization = req.headers.authorization;
    if (authorization === undefined) return done();
    // Only the Authorization header is a credential (SPEC 5.1). passport-http-bearer also reads
    // `access_token` from the body and the query: that would accept a token from the URL next to
    // a non-Bearer header, and refuse a valid header when a JSON body has an `access_token` field.
    const headersOnly = { headers: { authorization } };
    passport.authenticate('bearer', { session: false }, (err: unknown, principal: Principal | false) => {
      if (err instanceof AuthenticationFailure) req.authError = err.reason;
      else if (err) return done(err as Error);
      else if (principal) req.principal = principal;
      else req.authError = 'unauthorized'; // malformed Authorization header
      done();
    })(headersOnly, reply.raw, done);
  };
}
