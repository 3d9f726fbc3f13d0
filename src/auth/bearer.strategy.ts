/**
 * The passport-http-bearer strategy: turns a token into a Principal by its prefix. API keys
 * resolve here; OAuth access tokens go to the resolver registered under OAUTH_TOKEN_RESOLVER.
 */
import { Inject, Injectable, Optional } from '@nestjs/common';
import { PassportStrategy } from '@nestjs/passport';
import { Strategy } from 'passport-http-bearer';
import { KeysService } from '../keys/keys.service';
import { OAUTH_ACCESS_TOKEN_PREFIX, OAUTH_TOKEN_RESOLVER, OAuthTokenResolver, Principal, Resolution } from './principal';

@Injectable()
export class BearerStrategy extends PassportStrategy(Strategy, 'bearer') {
  constructor(
    private readonly keys: KeysService,
    @Optional() @Inject(OAUTH_TOKEN_RESOLVER) private readonly oauth?: OAuthTokenResolver,
  ) {
    super();
  }

  /** Called by passport with the token; a falsy return fails authentication with `info`. */
  async validate(token: string): Promise<Principal> {
    const resolution = await this.resolve(token);
    if ('principal' in resolution) return resolution.principal;
    throw new AuthenticationFailure(resolution.error);
  }

  private resolve(token: string): Promise<Resolution> {
    if (token.startsWith(OAUTH_ACCESS_TOKEN_PREFIX) && this.oauth) return this.oauth.resolve(token);
    return this.keys.resolve(token);
  }
}

export class AuthenticationFailure extends Error {
  constructor(readonly reason: 'unauthorized' | 'expired_token') {
    super(reason);
  }
}
