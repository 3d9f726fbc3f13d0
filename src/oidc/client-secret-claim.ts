/**
 * Which secret a client-credentials token was issued under: a claim the token keeps, which
 * introspection leaves out (oidc-provider.factory.ts). Rotating the secret deletes the client's
 * tokens, but a token request that authenticated with the old secret just before the rotation
 * committed saves its token after that deletion. The claim ends such a token too. A token from
 * before the claim existed has none and is taken as current.
 */
import type { Client } from 'oidc-provider';
import { digestsEqual, hashSecret } from '../keys/key-secrets';

export const SECRET_CLAIM = 'client_secret_hash';

export function secretClaim(secret: string | undefined): Record<string, string> | undefined {
  return secret ? { [SECRET_CLAIM]: hashSecret(secret) } : undefined;
}

export function issuedUnderCurrentSecret(client: Client, token: object): boolean {
  const issued = (token as { extra?: Record<string, unknown> }).extra?.[SECRET_CLAIM];
  const current = secretClaim(client.clientSecret)?.[SECRET_CLAIM];
  return issued === undefined || (typeof issued === 'string' && current !== undefined && digestsEqual(issued, current));
}
