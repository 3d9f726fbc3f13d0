/**
 * RP-initiated logout as the service runs it: the service's pages for its confirmation and its
 * end, a post_logout_redirect_uri followed only when confirmed, the account pages' sign-in ended
 * with the provider's, and a logout's text refused before the session holds it. Grants outlive
 * the logout (grant-revocation.ts).
 */
import type { Provider as ProviderType, ClientMetadata, KoaContextWithOIDC } from 'oidc-provider';
import { clearedAccountCookie } from './account-session';
import { textRefused, unstorableText } from './oidc-adapter';
import { OIDC_ROUTES } from './oidc-routes';
import { logoutPage, messagePage, shownAppName } from './pages';
import { setPage } from './send-page';

/** The provider's own pages load web fonts from elsewhere; the logout's confirmation is the service's page. */
export async function logoutSource(ctx: KoaContextWithOIDC, form: string): Promise<void> {
  setPage(ctx, logoutPage({ form, clientName: ctx.oidc.client?.clientName }));
}

/**
 * Both answers of the logout page end here: "Yes" with the browser's session gone, "No, stay
 * signed in" with it kept (and the asking app, if any, signed out of it alone).
 */
export async function postLogoutSuccessSource(ctx: KoaContextWithOIDC): Promise<void> {
  const client = ctx.oidc.client?.clientName;
  const stillSignedIn = !!(await ctx.oidc.provider.Session.get(ctx)).accountId;
  const left = client ? `You have signed out of ${shownAppName(client)}.` : '';
  if (stillSignedIn) setPage(ctx, messagePage('Still signed in', `${left} You are still signed in to this service in this browser.`.trim()));
  else setPage(ctx, messagePage('Signed out', left || 'You have signed out.'));
}

/**
 * A logout's `state` is kept in the browser's session (for the redirect after the confirmation),
 * and the provider saves the session again after the route's error handling, where an adapter
 * refusal (a NUL or a lone surrogate, which PostgreSQL cannot store: oidc-adapter.ts) would end
 * in answerLateErrors rather than in the route's answer. So such text is refused here, before the
 * session is read, as the adapter refuses it elsewhere: 400 `invalid_request`, rendered by
 * answerLateErrors as the routes render it. POST /auth/logout is Nest's, under the input policy,
 * and answered with the GET it stands for (interactions.controller.ts); the confirmation's fields
 * are compared, never kept.
 */
export async function refuseUnstorableLogout(ctx: KoaContextWithOIDC, next: () => Promise<void>): Promise<void> {
  if (ctx.path === OIDC_ROUTES.end_session) {
    const problem = unstorableText(ctx.query);
    if (problem) throw textRefused(problem);
  }
  return next();
}

/**
 * RP-Initiated Logout 1.0 §3: the provider must not send the browser on to a
 * post_logout_redirect_uri unless it can confirm that the target is legitimate. A client an admin
 * registered (it has a tenant) is vouched for by that admin, unless sign-up is open, when anyone
 * can be the admin of a tenant of their own. Otherwise anyone may have registered the URI and got
 * an id_token for an account of their own, so only an id_token_hint naming the account the browser
 * is signed in with confirms it: that user signed in to the client. An unconfirmed redirect is
 * dropped (set before the provider keeps it for the confirmation) and the logout ends at the
 * signed-out page: without a session the provider's page submits itself, so a redirect there
 * would bounce anyone to the URI without a click.
 */
export function confirmPostLogoutRedirects(provider: ProviderType, currentCtx: () => KoaContextWithOIDC | undefined, signupOpen: boolean): void {
  const client = provider.Client.prototype as unknown as {
    metadata(): ClientMetadata;
    postLogoutRedirectUriAllowed(value: string): boolean;
  };
  const allowed = client.postLogoutRedirectUriAllowed;
  client.postLogoutRedirectUriAllowed = function postLogoutRedirectUriAllowed(this: typeof client, value: string) {
    if (!allowed.call(this, value)) return false;
    if (this.metadata().tenant_id && !signupOpen) return true;
    const ctx = currentCtx();
    if (!ctx) return false;
    const hinted = (ctx.oidc.entities.IdTokenHint as { payload?: { sub?: unknown } } | undefined)?.payload?.sub;
    const account = ctx.oidc.session?.accountId;
    // The one hook the provider offers here is this check (end_session.js reads the parameter after it).
    if (!account || hinted !== account) (ctx.oidc.params as { post_logout_redirect_uri?: string }).post_logout_redirect_uri = undefined;
    return true;
  };
}

/**
 * Signing out at the provider ("Yes, sign me out", or the self-submitting form of a logout
 * without a session) ends the account pages' sign-in in this browser too: their cookie is the
 * service's, not the provider's session, and a shared computer's next user must not find the
 * pages (and their forms, such as the admin API key's) still signed in. Other browsers stay
 * signed in (that is "sign out everywhere": account-session.ts). "No, stay signed in" ends only
 * the asking app's part of the session, and leaves the account pages alone. Appended: the
 * provider's own session cookies are in the same header.
 */
export function endAccountSignInOnLogout(secure: boolean) {
  return async (ctx: KoaContextWithOIDC, next: () => Promise<void>): Promise<void> => {
    await next();
    const params = ctx.oidc?.params as { logout?: string } | undefined;
    if (ctx.oidc?.route !== 'end_session_confirm' || !params?.logout || ctx.status !== 303) return;
    ctx.append('Set-Cookie', clearedAccountCookie(secure));
  };
}
