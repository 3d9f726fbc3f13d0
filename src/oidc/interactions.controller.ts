/**
 * The user's side of the authorization code flow (SPEC 5.2): the provider sends a browser
 * here when it needs a sign-in or a consent (`interactions.url`); these pages answer and hand
 * the result back to the provider, which then continues to the client's redirect_uri.
 *
 *   GET  /auth/?interaction=     where the provider sends the browser: on to one of these
 *                                (plain GET /auth: the account pages)
 *   GET  /auth/sign-in?uid=      the sign-in form (with prompt=select_account, also "Continue as"
 *                                the account the browser is signed in with)
 *   POST /auth/sign-in           email + password → the interaction's login
 *   POST /auth/select-account    prompt=select_account: on with the account already signed in
 *   GET  /auth/consent?uid=      the requested scopes, literally, each one untickable but those
 *                                that come with any approval (openid, offline_access)
 *   POST /auth/authorize/decision (and its SPEC twin POST /auth/oauth2/consent)
 *                                approve (with the ticked scopes) or deny → the grant; an
 *                                approval that grants nothing is access_denied too
 *
 * A client registered for a tenant serves that tenant's users only (`servesUser`): a user of
 * another tenant is refused at the sign-in or the consent, whichever comes first, with a page
 * whose link takes the app its `access_denied` (RFC 6749 4.1.2.1). An `id_token_hint` names the
 * account the app expects (OIDC Core 3.1.2.1): another account chosen here is refused likewise,
 * the app told `login_required` (`refusedForHint`).
 */
import { Controller, Get, HttpCode, Post, Res } from '@nestjs/common';
import { ApiExtension, ApiOperation, ApiTags } from '@nestjs/swagger';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { InjectDataSource } from '@nestjs/typeorm';
import type { Provider } from 'oidc-provider';
import { DataSource } from 'typeorm';
import { Accepts, LenientRequest, Public } from '../auth/decorators';
import { AuditService } from '../audit/audit.service';
import { AppConfig } from '../config/app-config';
import { UserRow, UsersService } from '../users/users.service';
import { AccountForms } from './account-forms';
import { FormBody, FormFields, PageQuery, refusedRepeat } from './form-fields';
import { ApiFormBody, ApiFormExpired, ApiPage, ApiQueryParams, ApiSeeOther, FORM_FIELD } from './openapi-pages';
import { csrfToken, csrfValid } from './interaction-csrf';
import { claimInteraction } from './oidc-adapter';
import { OAuthTokenCache } from './oauth-token-cache';
import { OidcProvider } from './oidc-provider';
import { appRefusal } from './blocked-clients';
import { clientRegistration, isSelfRegistered } from './oauth-tokens';
import { accountGonePage, consentPage, errorPage, formExpiredPage, Notice, noticeOf, otherWorkspacePage, refusedAppReason, shownAppName, signInPage } from './pages';
import { signedInAs } from './account-session';
import { sendPage } from './send-page';
import { withinUserRole } from './scopes';
import { formList as list, nothingGranted, recordConsent, requestedScopes, scopeDecision } from './consent';

const FORM = 'application/x-www-form-urlencoded';
/** Well inside Node's 16 KiB for a request's head, which the GET that follows must fit in. */
const MAX_GET_URL = 8192;

/** A 303 to the GET form of a posted request, unless its URL would be too long to send. */
async function seeGet(reply: FastifyReply, path: string, body: FormBody): Promise<void> {
  const params = new URLSearchParams();
  for (const [k, v] of Object.entries(body)) for (const one of list(v)) params.append(k, one);
  const target = `${path}?${params}`;
  // A form's body may be far longer than a URL: the browser could not send the GET (its request
  // line would be refused, 431), nor often even read a Location that long.
  if (target.length > MAX_GET_URL) {
    return sendPage(reply, 400, errorPage('Request too long', `This request is too long to pass on (over ${MAX_GET_URL} characters as a URL). Go back to the application.`));
  }
  await reply.redirect(target, 303);
}
type Details = Awaited<ReturnType<Provider['interactionDetails']>>;

/** The prompts the sign-in page answers: a sign-in, or the choice of account (OIDC Core 3.1.2.1 `select_account`). */
const SIGN_IN_PROMPTS = ['login', 'select_account'];

const str = { type: 'string' };

@ApiTags('oauth pages')
@Public()
@Controller('auth')
export class InteractionsController {
  constructor(
    private readonly oidc: OidcProvider,
    private readonly users: UsersService,
    private readonly audit: AuditService,
    private readonly account: AccountForms,
    private readonly config: AppConfig,
    private readonly tokenCache: OAuthTokenCache,
    @InjectDataSource() private readonly db: DataSource,
  ) {}

  @ApiExtension('x-error-format', 'html')
  @Get()
  @ApiOperation({
    summary: 'Where the provider sends a browser mid-authorization (`?interaction=`): on to sign-in or consent (HTML); without it, the account pages (303 to /auth/grants)',
  })
  @ApiQueryParams({ interaction: 'The interaction the provider sends the browser back with', done: 'A confirmation to show on the sign-in page: `created` (where signing up from an app\'s sign-in page leads)' })
  @ApiSeeOther('To sign-in or consent; without `interaction`, to /auth/grants')
  @ApiPage(400, 'The interaction is over or not this browser\'s; or a field given more than once')
  async start(@PageQuery('interaction') uid: string | undefined, @LenientRequest() req: FastifyRequest, @Res() reply: FastifyReply): Promise<void> {
    if (await refusedRepeat(reply, req.query as FormBody, ['interaction', 'done'])) return;
    if (uid === undefined) return reply.redirect('/auth/grants', 303);
    const details = await this.details(req, reply, uid);
    if (!details) return;
    if (!SIGN_IN_PROMPTS.includes(details.prompt.name)) return reply.redirect(`/auth/consent?uid=${encodeURIComponent(details.uid)}`, 303);
    const done = noticeOf((req.query as FormBody).done, ['created']);
    await reply.redirect(`/auth/sign-in?uid=${encodeURIComponent(details.uid)}${done ? `&done=${done}` : ''}`, 303);
  }

  // OIDC Core 3.1.2.1 and RP-Initiated Logout 1.0 §2: these endpoints take POST as well as GET.
  // The provider's own POST support needs SameSite=None cookies (docs/oauth.md), so a post is
  // answered with the GET it stands for.
  @ApiExtension('x-error-format', 'html')
  @Post(['oauth2/authorize', 'authorize'])
  @Accepts(FORM)
  @ApiOperation({ summary: 'Authorization request as a form post (SPEC 5.3, OIDC Core 3.1.2.1): answered with a 303 to GET /auth/authorize with the same parameters' })
  @ApiFormBody({ client_id: str, redirect_uri: str, response_type: str, scope: str, state: str, code_challenge: str, code_challenge_method: str, nonce: str })
  @ApiSeeOther('To GET /auth/authorize with the same parameters')
  @ApiPage(400, `The parameters would make a URL over ${MAX_GET_URL} characters`)
  async authorizeByPost(@FormFields() body: FormBody, @Res() reply: FastifyReply): Promise<void> {
    await seeGet(reply, '/auth/authorize', body);
  }

  @ApiExtension('x-error-format', 'html')
  @Post('logout')
  @Accepts(FORM)
  @ApiOperation({ summary: 'Logout request as a form post (RP-Initiated Logout 1.0 §2): answered with a 303 to GET /auth/logout with the same parameters' })
  @ApiFormBody({ id_token_hint: str, post_logout_redirect_uri: str, state: str, client_id: str, logout_hint: str, ui_locales: str })
  @ApiSeeOther('To GET /auth/logout with the same parameters')
  @ApiPage(400, `The parameters would make a URL over ${MAX_GET_URL} characters`)
  async logoutByPost(@FormFields() body: FormBody, @Res() reply: FastifyReply): Promise<void> {
    await seeGet(reply, '/auth/logout', body);
  }

  @ApiExtension('x-error-format', 'html')
  @Get('sign-in')
  @ApiOperation({ summary: 'Sign-in page: for an app\'s authorization (`uid`), or for the account pages (`return_to`) (HTML)' })
  @ApiQueryParams({
    uid: 'The interaction, when signing in for an app',
    return_to: 'An /auth/ page to go back to, when signing in for the account pages',
    done: 'A confirmation to show: `signed-out` (where signing out everywhere leads), `created` (for an app, after signing up)',
  })
  @ApiPage(200, 'The sign-in form')
  @ApiPage(400, 'The interaction is over or not this browser\'s; or a field given more than once')
  async signInForm(
    @PageQuery('uid') uid: string | undefined,
    @PageQuery('return_to') returnTo: string | undefined,
    @LenientRequest() req: FastifyRequest,
    @Res() reply: FastifyReply,
  ): Promise<void> {
    if (await refusedRepeat(reply, req.query as FormBody, ['uid', 'return_to', 'done'])) return;
    if (uid === undefined) return this.account.signInForm(req, reply, returnTo);
    const details = await this.details(req, reply, uid, SIGN_IN_PROMPTS);
    if (!details) return;
    const accountUser = await signedInAs(req, await this.oidc.csrfKey(), (id) => this.users.byId(id));
    await sendPage(reply, 200, await this.signInPage(details, { email: accountUser?.email, notice: noticeOf((req.query as FormBody).done, ['created']) }));
  }

  @ApiExtension('x-error-format', 'html')
  @Post('sign-in')
  @ApiOperation({ summary: 'Sign-in form post (form-encoded: uid or return_to, csrf, email, password)' })
  @HttpCode(200)
  @Accepts(FORM)
  @ApiFormBody({ uid: FORM_FIELD.uid, return_to: str, csrf: FORM_FIELD.csrf, email: FORM_FIELD.email, password: FORM_FIELD.password }, ['email', 'password'])
  @ApiSeeOther('Signed in: on with the authorization, or to return_to')
  @ApiPage(400, 'The interaction is over or not this browser\'s; or a field given more than once')
  @ApiPage(401, 'The sign-in form again: wrong email or password')
  @ApiFormExpired()
  async signIn(@FormFields() body: FormBody, @LenientRequest() req: FastifyRequest, @Res() reply: FastifyReply): Promise<void> {
    if (await refusedRepeat(reply, body, ['uid', 'return_to', 'csrf', 'email', 'password'])) return;
    if (body.uid === undefined) return this.account.signIn(req, reply, body);
    const details = await this.details(req, reply, body.uid, SIGN_IN_PROMPTS, body.csrf);
    if (!details) return;
    const email = typeof body.email === 'string' ? body.email : '';
    const { user, refusal } = await this.users.authenticate(email, typeof body.password === 'string' ? body.password : '', req.ip);
    if (!user) return sendPage(reply, 401, await this.signInPage(details, { email, error: refusal }));
    if (await this.refusedForHint(req, reply, details, user)) return;
    if (await this.refusedForTenant(req, reply, details, user)) return;
    // A sign-in also answers a select_account prompt: the account chosen is the one signed in.
    await this.finish(req, reply, { login: { accountId: user.id }, ...(details.prompt.name === 'select_account' ? { select_account: {} } : {}) });
  }

  @ApiExtension('x-error-format', 'html')
  @Post('select-account')
  @ApiOperation({ summary: 'prompt=select_account: go on with the account this browser is signed in with (form-encoded: uid, csrf)' })
  @HttpCode(200)
  @Accepts(FORM)
  @ApiFormBody({ uid: FORM_FIELD.uid, csrf: FORM_FIELD.csrf }, ['uid'])
  @ApiSeeOther('On with the authorization')
  @ApiPage(400, 'The interaction is over, not this browser\'s, or not choosing an account, or the account is gone; or a field given more than once')
  @ApiPage(403, 'The app asked for another account (id_token_hint), or belongs to another tenant than the user\'s: refused, with a link that takes it the error')
  @ApiFormExpired()
  async selectAccount(@FormFields() body: FormBody, @LenientRequest() req: FastifyRequest, @Res() reply: FastifyReply): Promise<void> {
    if (await refusedRepeat(reply, body, ['uid', 'csrf'])) return;
    const details = await this.details(req, reply, body.uid, 'select_account', body.csrf);
    if (!details) return;
    const user = details.session?.accountId ? await this.users.byId(details.session.accountId) : undefined;
    if (!user) return sendPage(reply, 400, accountGonePage());
    if (await this.refusedForHint(req, reply, details, user)) return;
    if (await this.refusedForTenant(req, reply, details, user)) return;
    await this.finish(req, reply, { select_account: {} });
  }

  @ApiExtension('x-error-format', 'html')
  @Get('consent')
  @ApiOperation({ summary: 'Consent page listing the requested types, edges and extensions, each untickable (HTML)' })
  @ApiQueryParams({ uid: 'The interaction' })
  @ApiPage(200, 'The consent form')
  @ApiPage(400, 'The interaction is over, not this browser\'s, or not at consent; or a field given more than once')
  @ApiPage(403, 'The app belongs to another tenant than the user\'s: refused, with a link that takes it access_denied')
  async consentForm(@PageQuery('uid') uid: string | undefined, @LenientRequest() req: FastifyRequest, @Res() reply: FastifyReply): Promise<void> {
    if (await refusedRepeat(reply, req.query as FormBody, ['uid'])) return;
    const details = await this.details(req, reply, uid, 'consent');
    if (!details) return;
    const clientId = String(details.params.client_id);
    const client = await (await this.oidc.get()).Client.find(clientId);
    const user = details.session?.accountId ? await this.users.byId(details.session.accountId) : undefined;
    // Signed in earlier (for another app), the user comes here without the sign-in's check.
    if (user && (await this.refusedForTenant(req, reply, details, user))) return;
    const asked = requestedScopes(client, details.params.scope);
    await sendPage(
      reply,
      200,
      consentPage({
        uid: details.uid,
        csrf: await this.csrf(details.uid),
        action: '/auth/authorize/decision',
        clientName: client?.clientName ?? clientId,
        scopes: user ? withinUserRole(asked, user.role) : asked,
        extensions: clientRegistration(client).extensions,
        selfRegistered: isSelfRegistered(client) ? { redirectUri: String(details.params.redirect_uri) } : undefined,
      }),
    );
  }

  @ApiExtension('x-error-format', 'html')
  @Post(['authorize/decision', 'oauth2/consent'])
  @ApiOperation({ summary: 'Consent decision (form-encoded: uid, csrf, decision=approve|deny, scope repeated); redirects on to the app' })
  @HttpCode(200)
  @Accepts(FORM)
  @ApiFormBody({ uid: FORM_FIELD.uid, csrf: FORM_FIELD.csrf, decision: FORM_FIELD.decision, scope: FORM_FIELD.scope, scopes_shown: FORM_FIELD.scopes_shown }, ['uid', 'decision'])
  @ApiSeeOther('On to the app, with a code or access_denied')
  @ApiPage(400, 'The interaction is over, already answered, or not this browser\'s; or a field given more than once')
  @ApiFormExpired()
  async decide(@FormFields() body: FormBody, @LenientRequest() req: FastifyRequest, @Res() reply: FastifyReply): Promise<void> {
    if (await refusedRepeat(reply, body, ['uid', 'csrf', 'decision'])) return;
    const details = await this.details(req, reply, body.uid, 'consent', body.csrf);
    if (!details) return;
    if (!(await claimInteraction(this.db, details.uid))) {
      return sendPage(reply, 400, errorPage('Already answered', 'This request was already approved or denied. Go back to the application.'));
    }
    if (body.decision !== 'approve') return this.finish(req, reply, { error: 'access_denied', error_description: 'The user denied the request' });
    const provider = await this.oidc.get();
    const clientId = String(details.params.client_id);
    const accountId = details.session!.accountId;
    const user = await this.users.byId(accountId);
    if (!user) return sendPage(reply, 400, accountGonePage());
    if (await this.refusedForTenant(req, reply, details, user)) return;
    const client = await provider.Client.find(clientId);
    const { requested, grantable, granted, givesNothing } = scopeDecision(client, details.params.scope, user.role, body);
    const recorded = await recordConsent({ provider, audit: this.audit, db: this.db, tokenCache: this.tokenCache }, {
      grantId: details.grantId,
      tenantId: user.tenant_id,
      accountId,
      source: 'authorization_code',
      clientId,
      requested,
      granted,
      resource: this.config.baseUrl,
      givesNothing,
    });
    if (recorded === 'account_gone') return sendPage(reply, 400, accountGonePage());
    // Blocked by the tenant's admins while the user decided.
    if (recorded === 'client_blocked') return this.finish(req, reply, { error: 'access_denied', error_description: refusedAppReason(true) });
    // An Allow that gives nothing: the app is told why, not that the user denied (grantsAnything, consent.ts).
    if (recorded === 'nothing_recorded' || givesNothing) return this.finish(req, reply, { error: 'access_denied', error_description: nothingGranted(grantable) });
    await this.finish(req, reply, { consent: { grantId: recorded.grantId } });
  }

  /**
   * The interaction the request belongs to (the provider's cookie and the uid must agree), at
   * the expected prompt, with a valid CSRF token on POSTs; otherwise an error page is sent and
   * undefined returned.
   */
  private async details(req: FastifyRequest, reply: FastifyReply, uid: unknown, prompt?: string | readonly string[], csrf?: unknown): Promise<Details | undefined> {
    let details: Details;
    try {
      details = await (await this.oidc.get()).interactionDetails(req.raw, reply.raw);
    } catch {
      await sendPage(reply, 400, errorPage('Sign-in expired', 'This sign-in is over or was never started. Go back to the application and start again.'));
      return undefined;
    }
    const prompts = typeof prompt === 'string' ? [prompt] : prompt;
    if (details.uid !== uid || (prompts !== undefined && !prompts.includes(details.prompt.name))) {
      // The browser holds one interaction at a time (docs/oauth.md): another uid is most often one a newer authorization replaced.
      const why = details.uid !== uid ? ' A sign-in started since in this browser (in another tab or window, say) replaces an earlier one.' : '';
      await sendPage(reply, 400, errorPage('Wrong page', `This page does not belong to the sign-in in progress.${why} Go back to the application and start again.`));
      return undefined;
    }
    if (req.method === 'POST' && !csrfValid(await this.oidc.csrfKey(), `interaction:${details.uid}`, csrf)) {
      await sendPage(reply, 403, formExpiredPage());
      return undefined;
    }
    return details;
  }

  private async finish(req: FastifyRequest, reply: FastifyReply, result: Record<string, unknown>): Promise<void> {
    let to: string;
    try {
      to = await this.result(req, reply, result);
    } catch (err) {
      // The interaction went while the decision was made: it expired, or its session ended (signing
      // out everywhere, a new password, a demotion, the user's deletion). An Allow's grant stays,
      // as the user gave it; the app gets no code until it asks again.
      if ((err as { name?: string }).name !== 'SessionNotFound') throw err;
      return sendPage(reply, 400, errorPage('Sign-in ended', 'This sign-in ended while you decided: it expired, or you were signed out. Go back to the application and start again.'));
    }
    await reply.redirect(to, 303);
  }

  /** Ends the interaction with `result`: the URL that takes the browser on to the app with it. */
  private async result(req: FastifyRequest, reply: FastifyReply, result: Record<string, unknown>): Promise<string> {
    return (await this.oidc.get()).interactionResult(req.raw, reply.raw, result, { mergeWithLastSubmission: true });
  }

  /**
   * Whether the app is of another tenant than `user`, or one its tenant's admins blocked
   * (`appRefusal`), and if so ends the interaction with `access_denied` and sends the page that
   * says why (its link takes the app the error; a redirect at once would leave the user with only
   * the app's account of it).
   */
  private async refusedForTenant(req: FastifyRequest, reply: FastifyReply, details: Details, user: UserRow): Promise<boolean> {
    const clientId = String(details.params.client_id);
    const client = await (await this.oidc.get()).Client.find(clientId);
    const refused = await appRefusal(this.db, client, clientId, user);
    if (!refused) return false;
    const backTo = await this.result(req, reply, { error: 'access_denied', error_description: refusedAppReason(refused.blocked) });
    await sendPage(reply, 403, otherWorkspacePage({ clientName: client?.clientName ?? clientId, backTo, outcome: 'Nothing was shared with it.', blocked: refused.blocked }));
    return true;
  }

  /**
   * Whether the request's `id_token_hint` names another account than `user`, and if so ends the
   * interaction with `login_required` (OIDC Core 3.1.2.1) and sends the page that says so, as
   * `refusedForTenant` does. The provider checks the hint against the browser's session on the
   * authorization request only, not when the authorization resumes after this page: without this,
   * signing in as someone else got the app a code for that account. The hint was validated on
   * that request; it is validated again (expiry aside, as the provider does) rather than trusted.
   */
  private async refusedForHint(req: FastifyRequest, reply: FastifyReply, details: Details, user: UserRow): Promise<boolean> {
    const hint = details.params.id_token_hint;
    if (hint === undefined) return false;
    const provider = await this.oidc.get();
    const client = await provider.Client.find(String(details.params.client_id));
    const hinted = client && typeof hint === 'string' ? await provider.IdToken.validate(hint, client).then(({ payload }) => payload.sub, () => undefined) : undefined;
    if (hinted === user.id) return false;
    const backTo = await this.result(req, reply, { error: 'login_required', error_description: 'id_token_hint and authenticated subject do not match' });
    const app = shownAppName(client?.clientName ?? String(details.params.client_id));
    await sendPage(reply, 403, errorPage('Another account', `${app} asked for another account than the one you chose. Nothing was shared with it.`, { href: backTo, text: 'Go back to the application' }));
    return true;
  }

  /**
   * The sign-in form of an interaction; choosing an account, it also offers the one the browser is
   * signed in with. While sign-up is open it links to it, coming back here, for an app that serves
   * anyone (a new account is of a workspace of its own, which a tenant's app does not serve).
   * `email` fills the form in: the one refused, or the one signed in to the account pages in this
   * browser (just signed up, say), which is still only a suggestion: the password is asked for.
   */
  private async signInPage(details: Details, o: { email?: string; error?: string; notice?: Notice } = {}): Promise<string> {
    const current = details.prompt.name === 'select_account' && details.session?.accountId ? await this.users.byId(details.session.accountId) : undefined;
    const client = await (await this.oidc.get()).Client.find(String(details.params.client_id));
    const back = `/auth/?interaction=${encodeURIComponent(details.uid)}`;
    const signUp = this.config.SVC_SIGNUP_ENABLED && isSelfRegistered(client) ? `/auth/sign-up?return_to=${encodeURIComponent(back)}` : undefined;
    return signInPage({ uid: details.uid, csrf: await this.csrf(details.uid), clientName: client?.clientName ?? String(details.params.client_id), current: current?.email, signUp, ...o });
  }

  private async csrf(uid: string): Promise<string> {
    return csrfToken(await this.oidc.csrfKey(), `interaction:${uid}`);
  }
}
