/**
 * Which secret a client-credentials token was issued under: a claim the token keeps, which
 * introspection leaves out (provider-introspection.ts). Rotating the secret deletes the client's
 * tokens, but a token request that authenticated with the old secret just before the rotation
 * committed saves its token after that deletion. The claim ends such a token too. A token from
 * before the claim existed has none and is taken as current. A `private_key_jwt` client has no
 * secret: what it proves itself with is the key set at its `jwks_uri`, so its tokens carry that
 * URI's hash (`proofOf`), and moving it is that client's rotation. Under a claim of its own
 * (KEY_CLAIM): an instance of a release before it, which reads SECRET_CLAIM alone against a
 * client secret this client does not have, then takes such a token as current (a rolling deploy,
 * a rollback) rather than refusing it; and its credential stays the bare `client:<id>`, which
 * every release takes as current. What its tokens started is ended by the move itself, which puts
 * it under the old URI's tag (clients.service.ts).
 *
 * The claim also names the credential a client's tokens stand for (`clientCredentialId`): what
 * they started that outlives them (webhooks, event streams, bulk jobs) belongs to the client
 * *under that secret*, and ends with it. A leaked secret's webhook must not outlive the rotation
 * that answered the leak.
 *
 * A rotation may leave the replaced secret authenticating beside the new one for a while (its
 * overlap, `expire_previous_in`: previous-client-secret.ts). A token the previous secret gets then
 * carries the previous secret's claim, so it, and what it starts, is good until the overlap ends
 * (`goodUntil`, `isPrevious`) and ends then exactly as a rotation without overlap ends them.
 */
import { randomBytes } from 'node:crypto';
import type { Client } from 'oidc-provider';
import { CLIENT_SECRET_TAG, OAUTH_CLIENT_SECRET_PREFIX } from '../auth/principal';
import { digestsEqual, hashSecret } from '../keys/key-secrets';
import { PREVIOUS_SECRET, PREVIOUS_SECRET_ENDS } from './oidc-adapter';

export const SECRET_CLAIM = 'client_secret_hash';
/** A `private_key_jwt` client's tokens' claim: the hash of its `jwks_uri` (see the header). */
export const KEY_CLAIM = 'client_key_hash';
/** Every claim naming what a token was issued under, which introspection leaves out. */
export const CREDENTIAL_CLAIMS = [SECRET_CLAIM, KEY_CLAIM] as const;

/**
 * A new client secret, for an admin's registration or rotation and for open registration. It
 * carries a prefix of its own, as the service's keys and tokens do: the logs mask one wherever in
 * a URL it is pasted (request-logging.ts), and secret scanners can tell it. Secrets issued before
 * it have none and keep working.
 */
export const newClientSecret = () => `${OAUTH_CLIENT_SECRET_PREFIX}${randomBytes(32).toString('base64url')}`;

/** What a client authenticates with: its secret, or where a client without one publishes its keys. */
export function proofOf(secret: unknown, jwksUri: unknown): string | undefined {
  if (typeof secret === 'string') return secret;
  return typeof jwksUri === 'string' ? `jwks_uri:${jwksUri}` : undefined;
}

/** The claim of `client`'s tokens issued now: its secret's, or its key set's (none for a public client). */
export function currentClaim(client: Client): Record<string, string> | undefined {
  if (client.clientSecret) return secretClaim(client.clientSecret);
  const proof = proofOf(undefined, client.jwksUri);
  return proof ? { [KEY_CLAIM]: hashSecret(proof) } : undefined;
}

/** The claim of tokens issued under a client secret (or, for a credential's tag, under any proof). */
export function secretClaim(secret: string | undefined): Record<string, string> | undefined {
  return secret ? { [SECRET_CLAIM]: hashSecret(secret) } : undefined;
}

/** Whether each claim the token carries names what the client authenticates with now; a token with none is current. */
export function issuedUnderCurrentSecret(client: Client, token: object): boolean {
  const extra = (token as { extra?: Record<string, unknown> }).extra ?? {};
  const current = currentClaim(client) ?? {};
  return CREDENTIAL_CLAIMS.every((name) => {
    const issued = extra[name];
    return issued === undefined || (typeof issued === 'string' && current[name] !== undefined && digestsEqual(issued, current[name]));
  });
}

/** A secret a rotation replaced, still good beside the new one until `endsAt` (epoch milliseconds). */
export interface PreviousSecret {
  secret: string;
  endsAt: number;
}

/** The previous secret a client's stored payload (as the adapter opens it) holds, while its overlap lasts. */
export function livePreviousSecret(payload: Record<string, unknown> | undefined, now = Date.now()): PreviousSecret | undefined {
  const secret = payload?.[PREVIOUS_SECRET];
  const endsAt = payload?.[PREVIOUS_SECRET_ENDS];
  return typeof secret === 'string' && typeof endsAt === 'number' && endsAt > now ? { secret, endsAt } : undefined;
}

/**
 * Until when (epoch milliseconds) a client's token is good as far as what it was issued under
 * goes: for ever under what the client authenticates with now, to the end of the overlap under
 * the previous secret while that lasts, else undefined (not good).
 */
export function goodUntil(client: Client, token: object, previous?: PreviousSecret, now = Date.now()): number | undefined {
  if (issuedUnderCurrentSecret(client, token)) return Infinity;
  const issued = (token as { extra?: Record<string, unknown> }).extra?.[SECRET_CLAIM];
  const underPrevious = !!previous && previous.endsAt > now && typeof issued === 'string' && digestsEqual(issued, hashSecret(previous.secret));
  return underPrevious ? previous.endsAt : undefined;
}

/** Enough of the secret's hash to tell secrets apart (CLIENT_SECRET_TAG); the hash of a random secret gives nothing away. */
const TAG_LENGTH = 16;

/** The credential of a client's tokens issued under the secret whose claim is `secretHash`; the bare `client:<id>` for tokens from before the claim. */
export function clientCredentialId(clientId: string, secretHash: unknown): string {
  return typeof secretHash === 'string' ? `client:${clientId}:${secretHash.slice(0, TAG_LENGTH)}` : `client:${clientId}`;
}

/**
 * The client of a `client:` credential; whether the client's secret now is the one the credential
 * names (always, for a bare one); whether the previous secret, while its overlap lasts, is.
 */
export function clientOfCredential(credentialId: string): {
  clientId: string;
  isCurrent: (client: Client) => boolean;
  isPrevious: (previous: PreviousSecret | undefined, now?: number) => boolean;
} {
  const tagged = CLIENT_SECRET_TAG.exec(credentialId);
  if (!tagged) return { clientId: credentialId.slice('client:'.length), isCurrent: () => true, isPrevious: () => false };
  const [, owner, tag] = tagged;
  const clientId = owner.slice('client:'.length);
  return {
    clientId,
    isCurrent: (client) => currentClaim(client)?.[SECRET_CLAIM]?.slice(0, TAG_LENGTH) === tag,
    isPrevious: (previous, now = Date.now()) => !!previous && previous.endsAt > now && hashSecret(previous.secret).slice(0, TAG_LENGTH) === tag,
  };
}
