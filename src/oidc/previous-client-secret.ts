/**
 * The overlap after a client secret's rotation (`POST /auth/clients/{id}/secret` with
 * `expire_previous_in`, clients.service.ts): until it ends, the replaced secret authenticates the
 * client too, wherever the provider takes `client_secret_basic` or `client_secret_post` (token,
 * introspection, revocation, device authorization), and what it gets is its own.
 *
 * Where: oidc-provider's client authentication (lib/shared/client_auth.js of the pinned version)
 * finds the client, checks the method, then asks the client `compareClientSecret(presented)`.
 * Only that last question is widened here: when the current secret does not match, the previous
 * one (read from the client's stored row, so one more look-up only for a secret that is not the
 * current one) is compared, in constant time, while its overlap lasts. Everything else is the
 * provider's own: the client lookup, the method check, the order of checks, and every refusal
 * (`invalid_client`, 401 with `WWW-Authenticate: Basic` where the secret came that way) stay
 * exactly as they are. The alternatives were worse: a pre-check middleware would read client
 * credentials a second time, outside the provider's rules for them, and an adapter that answered
 * the previous secret as `client_secret` would have to know which one the request presented.
 *
 * The request that authenticated with the previous secret is remembered (by its context, which
 * is gone with the request), so that a client-credentials token it gets carries the previous
 * secret's claim (client-secret-claim.ts): that token, and what it starts, ends with the overlap,
 * not with the next rotation after it.
 *
 * `client_secret_jwt` is not widened: the provider verifies its assertion against a key set it
 * derives from the current secret when it builds the client, and would not tell which secret an
 * assertion was signed with; such a client switches to the new secret at once, as before.
 */
import type { Client, KoaContextWithOIDC, Provider } from 'oidc-provider';
import { digestsEqual, hashSecret } from '../keys/key-secrets';
import { goodUntil, livePreviousSecret, PreviousSecret, secretClaim, SECRET_CLAIM } from './client-secret-claim';

/** The requests that authenticated with their client's previous secret, and its claim. */
const byPreviousSecret = new WeakMap<object, Record<string, string>>();

/** The client's previous secret as stored, while its overlap lasts. */
export async function previousSecretOf(provider: Provider, clientId: string): Promise<PreviousSecret | undefined> {
  const store = (provider.Client as unknown as { adapter: { find(id: string): Promise<Record<string, unknown> | undefined> } }).adapter;
  return livePreviousSecret(await store.find(clientId));
}

/**
 * Until when (epoch milliseconds) a client's token is good as far as the secret it was issued
 * under goes (`goodUntil`), the previous secret looked up only for a token not under the current one.
 */
export async function tokenGoodUntil(provider: Provider, client: Client, token: object): Promise<number | undefined> {
  const now = goodUntil(client, token);
  if (now !== undefined) return now;
  const claimed = (token as { extra?: Record<string, unknown> }).extra?.[SECRET_CLAIM];
  return typeof claimed === 'string' ? goodUntil(client, token, await previousSecretOf(provider, client.clientId)) : undefined;
}

/** The claim of a client-credentials token the request gets: the previous secret's if that authenticated it. */
export const previousSecretClaim = (ctx: KoaContextWithOIDC): Record<string, string> | undefined => byPreviousSecret.get(ctx);

/** Widens the provider's secret comparison to the previous secret during its overlap (see the header). */
export function acceptPreviousSecret(provider: Provider, ctxOf: () => KoaContextWithOIDC | undefined): void {
  const client = provider.Client.prototype as unknown as { clientId: string; compareClientSecret(actual: string): boolean | Promise<boolean> };
  const compare = client.compareClientSecret;
  client.compareClientSecret = async function compareClientSecret(this: typeof client, actual: string): Promise<boolean> {
    if (await compare.call(this, actual)) return true;
    // Outside a request there is nothing to remember the secret in: the current one alone.
    const ctx = ctxOf();
    if (!ctx) return false;
    const previous = await previousSecretOf(provider, this.clientId);
    // Digests of both, so the comparison takes as long whatever the lengths.
    if (!previous || !digestsEqual(hashSecret(previous.secret), hashSecret(actual))) return false;
    byPreviousSecret.set(ctx, secretClaim(previous.secret)!);
    return true;
  };
}
