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
    if (req.headers.authorization === undefined) return next();
    passport.authenticate('bearer', { session: false }, (err: unknown, principal: Principal | false) => {
      if (err instanceof AuthenticationFailure) req.authError = err.reason;
      else if (err) return next(err);
      else if (principal) req.principal = principal;
      else req.authError = 'unauthorized'; // malformed Authorization header
      next();
    })(req, res, next);
  }
}
