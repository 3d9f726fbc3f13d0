/**
 * The provider's own requests: a client's `jwks_uri`, fetched when it authenticates with
 * private_key_jwt. The URL is a registrant's (open registration needs no credential), so it
 * reaches what a webhook may and no more (target-policy.ts, WEBHOOK_ALLOW_PRIVATE_TARGETS):
 * each address a name resolves to is checked inside the connection's own lookup (so DNS
 * rebinding is caught where the address is used), a literal address before, and no redirect is
 * followed. The provider's own guard would connect first and only then drop a private address,
 * after a TLS ClientHello had gone out. `sector_identifier_uri`, the other URL it would fetch, is
 * refused at registration (client-metadata.ts): subjects are public, so it means nothing.
 */
import type { Configuration } from 'oidc-provider';
import { fetch as undiciFetch } from 'undici';
import { guardedAgent, literalAddressProblem, TargetRefused } from '../common/target-policy';

/** A key set larger than this is refused: a few keys take a few KiB. */
export const MAX_JWKS_BYTES = 64 * 1024;

export function providerFetch(allowPrivate: boolean): NonNullable<Configuration['fetch']> {
  const agent = guardedAgent(allowPrivate);
  return async (input, init) => {
    const url = new URL(input instanceof Request ? input.url : input);
    const problem = literalAddressProblem(url, allowPrivate);
    if (problem) throw new TargetRefused(problem);
    const response = await undiciFetch(url, { ...(init as object), redirect: 'error', dispatcher: agent });
    return response as unknown as Response;
  };
}
