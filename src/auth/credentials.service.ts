/**
 * The credential behind something that outlives its request (a webhook, an event stream, a bulk
 * job), as it is now: an API key by id (KeysService, cached by key generation), an OAuth grant or
 * client through the OAuth resolver. Null once revoked: the webhook gets nothing more, the stream
 * ends, the job fails.
 */
import { Inject, Injectable, Optional } from '@nestjs/common';
import { isId } from '../common/ids';
import { KeysService } from '../keys/keys.service';
import { OAUTH_TOKEN_RESOLVER, OAuthTokenResolver, Principal } from './principal';

@Injectable()
export class CredentialsService {
  constructor(
    private readonly keys: KeysService,
    @Optional() @Inject(OAUTH_TOKEN_RESOLVER) private readonly oauth?: OAuthTokenResolver,
  ) {}

  async principalById(tenantId: string, credentialId: string): Promise<Principal | null> {
    if (isId(credentialId)) {
      const key = await this.keys.principalById(tenantId, credentialId);
      if (key || !this.oauth) return key;
    }
    return this.oauth ? this.oauth.principalByCredential(tenantId, credentialId) : null;
  }
}
