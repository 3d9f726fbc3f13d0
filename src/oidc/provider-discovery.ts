/** The discovery document (RFC 8414, OIDC Discovery) made to say what the service does. */
import type { KoaContextWithOIDC } from 'oidc-provider';

/** The discovery document as the provider builds it, made to say what the service does (the two below). */
export async function discoveryAsServed(ctx: KoaContextWithOIDC, next: () => Promise<void>): Promise<void> {
  await next();
  if (ctx.oidc?.route !== 'discovery' || !ctx.body || typeof ctx.body !== 'object') return;
  const body = ctx.body as Record<string, unknown>;
  publishClientAuthOfEveryEndpoint(body);
  advertiseIssuedClaimsOnly(body);
}

/**
 * RFC 8414 2: discovery without `introspection_endpoint_auth_methods_supported` or
 * `revocation_endpoint_auth_methods_supported` tells a client those endpoints take
 * client_secret_basic alone. They authenticate a client with the token endpoint's own code
 * (lib/shared/client_auth.js of the pinned version), so they take exactly what it takes, a public
 * client's bare client_id (`none`) included: each gets the token endpoint's list, and its JWT
 * methods' algorithms, which RFC 8414 requires beside `client_secret_jwt` and `private_key_jwt`.
 */
function publishClientAuthOfEveryEndpoint(body: Record<string, unknown>): void {
  const copy = (value: unknown) => (Array.isArray(value) ? [...value] : undefined);
  for (const endpoint of ['introspection', 'revocation']) {
    if (!body[`${endpoint}_endpoint`]) continue;
    body[`${endpoint}_endpoint_auth_methods_supported`] = copy(body.token_endpoint_auth_methods_supported);
    body[`${endpoint}_endpoint_auth_signing_alg_values_supported`] = copy(body.token_endpoint_auth_signing_alg_values_supported);
  }
}

/**
 * OIDC Discovery 3: `claims_supported` lists the claims the provider can supply. oidc-provider's
 * defaults name `sid`, which it puts in tokens only for front- or back-channel logout, neither of
 * which is offered, so no token or userinfo answer ever carries it.
 */
function advertiseIssuedClaimsOnly(body: { claims_supported?: unknown }): void {
  if (Array.isArray(body.claims_supported)) body.claims_supported = body.claims_supported.filter((claim) => claim !== 'sid');
}
