/**
 * The passport-http-bearer strategy: turns a token into a Principal (CredentialsService.resolveBearer).
 */
import { Injectable } from '@nestjs/common';
import { PassportStrategy } from '@nestjs/passport';
import { Strategy } from 'passport-http-bearer';
import { CredentialsService } from './credentials.service';
import type { Principal } from './principal';

@Injectable()
export class BearerStrategy extends PassportStrategy(Strategy, 'bearer') {
  constructor(private readonly credentials: CredentialsService) {
    super();
  }

  /** Called by passport with the token; a falsy return fails authentication with `info`. */
  async validate(token: string): Promise<Principal> {
    const resolution = await this.credentials.resolveBearer(token);
    if ('principal' in resolution) return resolution.principal;
    throw new AuthenticationFailure(resolution.error);
  }
}

export class AuthenticationFailure extends Error {
  constructor(readonly reason: 'unauthorized' | 'expired_token') {
    super(reason);
  }
}
