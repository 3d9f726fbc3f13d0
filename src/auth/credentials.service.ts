/**
 * Credentials as they are now. A bearer token (`resolveBearer`): an API key (KeysService) or an
 * `svc_at_` OAuth access token (the OAuth resolver), both cached under their revocation
 * generation; the bearer strategy asks it for every request, and an event stream again while it
 * is open. The credential behind something that outlives its request (a webhook, a bulk job), by
 * id (`principalById`): an API key, an OAuth grant or client. Null once revoked (an API key also
 * once expired): the webhook gets nothing more, the job fails.
 */
import { Inject, Injectable, Optional } from '@nestjs/common';
import { isId } from '../common/ids';
import { KeysService } from '../keys/keys.service';
import { OAUTH_ACCESS_TOKEN_PREFIX, OAUTH_TOKEN_RESOLVER, OAuthTokenResolver, Principal, Resolution } from './principal';

@Injectable()
export class CredentialsService {
  constructor(
    private readonly keys: KeysService,
    @Optional() @Inject(OAUTH_TOKEN_RESOLVER) private readonly oauth?: OAuthTokenResolver,
  ) {}

  resolveBearer(token: string): Promise<Resolution> {
    if (token.startsWith(OAUTH_ACCESS_TOKEN_PREFIX) && this.oauth) return this.oauth.resolve(token);
    return this.keys.resolve(token);
  }

  async principalById(tenantId: string, credentialId: string): Promise<Principal | null> {
    if (isId(credentialId)) {
      const key = await this.keys.principalById(tenantId, credentialId);
      if (key || !this.oauth) return key;
    }
    return this.oauth ? this.oauth.principalByCredential(tenantId, credentialId) : null;
  }
}
