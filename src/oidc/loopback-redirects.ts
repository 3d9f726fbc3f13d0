/** Redirect URIs to a loopback IP literal match a request's whatever its port (RFC 8252 7.3). */
import type { Provider as ProviderType } from 'oidc-provider';

/**
 * OAuth 2.1 8.4.2, RFC 8252 7.3: a native app listens on whatever loopback port it gets, so a
 * redirect URI to a loopback IP literal over http matches a request's whatever its port; the rest
 * (path, query) still matches exactly. `localhost` stays exact (RFC 8252 8.3 advises against it;
 * the provider's own rule, for native clients only, also took it), and so does every other URI.
 */
const LOOPBACK_IP_REDIRECT = /^http:\/\/(127\.0\.0\.1|\[::1\])(?::\d{1,5})?(?=[/?]|$)/;

/** The URI without its port when it is a loopback IP redirect URI, else undefined. */
function withoutLoopbackPort(uri: string): string | undefined {
  const match = LOOPBACK_IP_REDIRECT.exec(uri);
  return match && URL.canParse(uri) ? `http://${match[1]}${uri.slice(match[0].length)}` : undefined;
}

export function allowAnyLoopbackPort(provider: ProviderType): void {
  const matches = (registered: string[] | undefined, value: string) => {
    if (registered?.includes(value)) return true;
    const portless = withoutLoopbackPort(value);
    return portless !== undefined && !!registered?.some((uri) => withoutLoopbackPort(uri) === portless);
  };
  const client = provider.Client.prototype as unknown as {
    redirectUris?: string[];
    postLogoutRedirectUris?: string[];
    redirectUriAllowed(value: string): boolean;
    postLogoutRedirectUriAllowed(value: string): boolean;
  };
  client.redirectUriAllowed = function redirectUriAllowed(this: typeof client, value: string) {
    return matches(this.redirectUris, value);
  };
  client.postLogoutRedirectUriAllowed = function postLogoutRedirectUriAllowed(this: typeof client, value: string) {
    return matches(this.postLogoutRedirectUris, value);
  };
}
