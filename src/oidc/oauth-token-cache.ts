/**
 * OAuth access tokens resolved to Principals, cached in process exactly as API keys are
 * (keys/key-cache.ts): an entry counts only under the current generation of OAuth changes in
 * Redis, so a revocation (of a token, a grant, a user) that bumps it holds on every instance from
 * the next request. Entries never outlive their token, nor KEY_CACHE_TTL_SECONDS: the sweep drops
 * them from memory within a second of either. Its count and byte caps are its own, apart from the
 * API keys'.
 */
import { Injectable } from '@nestjs/common';
import { KeyCache, OAUTH_GENERATION } from '../keys/key-cache';

@Injectable()
export class OAuthTokenCache extends KeyCache {
  protected override readonly counterName = OAUTH_GENERATION;
}
