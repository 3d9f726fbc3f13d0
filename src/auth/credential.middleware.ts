/**
 * First step of the pipeline: when a request carries credentials, run the bearer strategy and
 * attach the Principal (or the reason it failed). It never rejects by itself: the rate limiter
 * after it needs to know the caller, and the BearerGuard decides per route.
 */
import { Injectable, NestMiddleware } from '@nestjs/common';
import type { NextFunction, Request, Response } from 'express';
import passport from 'passport';
import type { AuthedRequest } from './decorators';
import { AuthenticationFailure } from './bearer.strategy';
import type { Principal } from './principal';

@Injectable()
export class CredentialMiddleware implements NestMiddleware {
  use(req: Request & AuthedRequest, res: Response, next: NextFunction): void {
    const authorization = req.headers.authorization;
    if (authorization === undefined) return next();
    // Only the Authorization header is a credential (SPEC 5.1). passport-http-bearer also reads
    // `access_token` from the body and the query: that would accept a token from the URL next to
    // a non-Bearer header, and refuse a valid header when a JSON body has an `access_token` field.
    const headersOnly = { headers: { authorization } } as unknown as Request;
    passport.authenticate('bearer', { session: false }, (err: unknown, principal: Principal | false) => {
      if (err instanceof AuthenticationFailure) req.authError = err.reason;
      else if (err) return next(err);
      else if (principal) req.principal = principal;
      else req.authError = 'unauthorized'; // malformed Authorization header
      next();
    })(headersOnly, res, next);
  }
}
