/**
 * The user's account pages (SPEC 5.3, 5.8): connected apps (`/auth/grants`, with inspect and
 * revoke), the sign-in sessions apps use (`/auth/sessions`, sign out everywhere), both lists paged
 * as the API's are (`limit`, `cursor`), and `/auth/security`, where
 * an admin user can create an admin API key, expiring if they choose (`POST /auth/keys`: how a
 * tenant made by sign-up gets its first key). A user
 * signs in to them at `/auth/sign-in` (account-forms.ts); their "Sign out" (the provider's logout)
 * ends that sign-in in this browser (provider-logout.ts), signing out everywhere in every
 * browser (account-session.ts). Pages are HTML; the revoke routes also answer JSON to a
 * caller that asks for it. A browser's form post is refused with a page too (signed out, already
 * revoked), a JSON caller with the API's error envelope.
 */
import { Controller, Delete, Get, HttpCode, Param, Post, Res } from '@nestjs/common';
import { ApiExtension, ApiExtraModels, ApiOkResponse, ApiOperation, ApiResponse, ApiTags, getSchemaPath } from '@nestjs/swagger';
import { ApiErrors } from '../openapi/api-errors.decorator';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { Accepts, LenientRequest, Public } from '../auth/decorators';
import { AuditService } from '../audit/audit.service';
import { ApiError } from '../common/api-error';
import { ApiPageQuery, PageQuery as ListQuery, pageQueryOf } from '../common/pagination';
import { isReadableName, rfc3339Instant } from '../common/validation';
import { AppConfig } from '../config/app-config';
import { keyLabel, MAX_KEY_LIFETIME_DAYS } from '../keys/keys.dto';
import { KeysService } from '../keys/keys.service';
import { isUserEmail, isUserName, isUserPassword } from '../users/users.dto';
import { UserRow, UsersService } from '../users/users.service';
import { AccountForms } from './account-forms';
import { AccountGrant, AccountGrantList, AccountSessionList } from './account.dto';
import { isClientId, ParseProviderIdPipe } from './clients.dto';
import { FormBody, FormFields, PageQuery, refuseNonObjectJson } from './form-fields';
import { ApiFormBody, ApiFormExpired, ApiFormExpiredOrError, ApiPage, ApiPageOrError, ApiQueryParams, ApiSeeOther, ApiSignedInUser, FORM_FIELD } from './openapi-pages';
import { clearAccountCookie, signedInAs } from './account-session';
import { GrantsService } from './grants.service';
import { OidcProvider } from './oidc-provider';
import { createdKeyPage, errorPage, formExpiredPage, FormProblem, grantsPage, KeyFormSent, noticeOf, securityPage, sessionsPage, signUpPage } from './pages';
import { sendPage } from './send-page';

const FORM = 'application/x-www-form-urlencoded';

const str = { type: 'string' };
const REVOKED = { type: 'object', properties: { id: str, revoked: { type: 'boolean' } } };

/**
 * Where sign-up may send the new user on: back into an authorization in progress (its sign-in
 * page links here), which then asks them to sign in; nowhere else.
 */
const signUpReturn = (to: unknown) => (typeof to === 'string' && /^\/auth\/\?interaction=[\w-]{1,64}$/.test(to) ? to : undefined);

/** What is wrong with a sign-up form, each problem at its field: what is missing said as such, not as a rule it breaks. */
function signUpProblems(name: string, email: string, password: string): FormProblem[] {
  const problems: FormProblem[] = [];
  if (name === '') problems.push({ text: 'Enter your name.', fields: ['name'] });
  else if (!isUserName(name)) problems.push({ text: 'Give a name of at most 200 characters. A name cannot hold control characters or bidirectional override characters.', fields: ['name'] });
  if (email === '') problems.push({ text: 'Enter your email address.', fields: ['email'] });
  else if (!isUserEmail(email)) problems.push({ text: 'Give a valid email address.', fields: ['email'] });
  if (password === '') problems.push({ text: 'Enter a password of at least 10 characters.', fields: ['password'] });
  else if (!isUserPassword(password)) problems.push({ text: 'The password needs at least 10 characters, not only spaces or invisible ones.', fields: ['password'] });
  return problems;
}

/** Where a list page's link to its next page leads: the same list from `next_cursor` on, at the same `limit`. */
const nextPage = (path: string, query: ListQuery, next: string | null): string | undefined =>
  next === null ? undefined : `${path}?${new URLSearchParams({ ...(query.limit !== undefined && { limit: String(query.limit) }), cursor: next })}`;

/** A form field's text, trimmed; '' when it is absent or repeated. */
const formText = (v: unknown): string => (typeof v === 'string' ? v.trim() : '');

/** A `datetime-local` value (`YYYY-MM-DDTHH:MM`, seconds optional): a date-time without its zone. */
const LOCAL_DATE_TIME = /^\d{4}-\d\d-\d\dT\d\d:\d\d(:\d\d(\.\d{1,3})?)?$/;

/**
 * The key form's expiry: none when empty; else its `datetime-local` value read as UTC (the time
 * the pages show), or an RFC 3339 date-time, checked as POST /keys checks `expires_at`
 * (rfc3339Instant, then `issueOf`, KeysService `expiryIssue`: by the database's clock). The
 * instant, as POST /keys takes it, or what to say at the field.
 */
async function formExpiry(value: unknown, issueOf: (at: Date) => Promise<string | undefined>): Promise<{ at?: string; problem?: FormProblem }> {
  const text = formText(value);
  if (text === '' && (value === undefined || typeof value === 'string')) return {};
  const at = rfc3339Instant(LOCAL_DATE_TIME.test(text) ? `${text.length === 16 ? `${text}:00` : text}Z` : text);
  if (!at) return { problem: { text: 'Give the expiry as a date and time (UTC), or leave it empty for a key that does not expire.', fields: ['expires_at'] } };
  const issue = await issueOf(at);
  return issue ? { problem: { text: `The expiry ${issue}.`, fields: ['expires_at'] } } : { at: at.toISOString() };
}

const notAllowedPage = () => errorPage('Not allowed', 'Only an admin user may create API keys.');

const GRANT_ID = new ParseProviderIdPipe('grant');

/** A grant id from the path, checked by /users/{id}/grants/{grant_id}'s pipe, but after the sign-in check: 400 `invalid_id`. */
const grantId = (id: string): string => GRANT_ID.transform(id, { type: 'param', data: 'id' });

@ApiTags('oauth account')
@ApiExtraModels(AccountGrantList, AccountSessionList)
@Public()
@Controller('auth')
export class AccountController {
  constructor(
    private readonly oidc: OidcProvider,
    private readonly users: UsersService,
    private readonly keys: KeysService,
    private readonly grants: GrantsService,
    private readonly forms: AccountForms,
    private readonly audit: AuditService,
    private readonly config: AppConfig,
  ) {}

  @ApiExtension('x-error-format', 'html')
  @Get('sign-up')
  @ApiOperation({ summary: 'Sign-up page (only when SVC_SIGNUP_ENABLED): a new tenant whose first user is its admin (HTML)' })
  @ApiQueryParams({ return_to: 'The authorization in progress to go back to (`/auth/?interaction=…`), when coming from an app\'s sign-in page' })
  @ApiPage(200, 'The sign-up form')
  @ApiPage(404, 'Sign-up is not enabled')
  async signUpForm(@PageQuery('return_to') returnTo: string | undefined, @LenientRequest() req: FastifyRequest, @Res() reply: FastifyReply): Promise<void> {
    if (!this.config.SVC_SIGNUP_ENABLED) return sendPage(reply, 404, errorPage('Not available', 'Sign-up is not open on this service.'));
    await sendPage(reply, 200, signUpPage({ csrf: await this.forms.csrf(req, reply), returnTo: signUpReturn(returnTo) }));
  }

  @ApiExtension('x-error-format', 'html')
  @Post('sign-up')
  @HttpCode(200)
  @Accepts(FORM)
  @ApiOperation({ summary: 'Sign-up form post (form-encoded: csrf, name, email, password, return_to); signs the new user in to the account pages' })
  @ApiFormBody({ csrf: FORM_FIELD.csrf, name: { type: 'string', maxLength: 200 }, email: FORM_FIELD.email, password: { ...FORM_FIELD.password, minLength: 10 }, return_to: str }, ['csrf', 'name', 'email', 'password'])
  @ApiSeeOther('Signed up and in: to /auth/security, or back to the authorization in progress (return_to)')
  @ApiPage(400, 'The form again, with what to correct')
  @ApiFormExpired()
  @ApiPage(404, 'Sign-up is not enabled')
  async signUp(@FormFields() body: FormBody, @LenientRequest() req: FastifyRequest, @Res() reply: FastifyReply): Promise<void> {
    if (!this.config.SVC_SIGNUP_ENABLED) return sendPage(reply, 404, errorPage('Not available', 'Sign-up is not open on this service.'));
    if (!(await this.forms.valid(req, body.csrf))) return sendPage(reply, 403, formExpiredPage());
    const text = (v: unknown) => (typeof v === 'string' ? v.trim() : '');
    const [name, email, password] = [text(body.name), text(body.email), typeof body.password === 'string' ? body.password : ''];
    const returnTo = signUpReturn(body.return_to);
    const again = (problems: FormProblem[]) => sendPage(reply, 400, signUpPage({ csrf: String(body.csrf), name, email, problems, returnTo }));
    // Every problem at once, each at its field: one at a time, the form would come back once per mistake.
    const problems = signUpProblems(name, email, password);
    if (problems.length) return again(problems);
    const user = await this.users.signUp(email, password, name);
    if (!user) return again([{ text: 'An account with this email already exists. Sign in instead, or use another email.', fields: ['email'] }]);
    // Back at the app's sign-in, the page says the account is made and holds its email (from the cookie set here).
    await this.forms.signInAs(reply, user, returnTo ? `${returnTo}&done=created` : '/auth/security');
  }

  @ApiExtension('x-error-format', 'html')
  @Get('grants')
  @ApiOperation({ summary: 'Apps connected to the signed-in user, newest first, a page at a time (HTML, linking to the next page; JSON with Accept: application/json)' })
  @ApiResponse({ status: 200, description: 'The grants page, or {grants, next_cursor} as JSON', content: { 'text/html': { schema: str }, 'application/json': { schema: { $ref: getSchemaPath(AccountGrantList) } } } })
  @ApiPageQuery()
  @ApiQueryParams({ done: 'A confirmation to show: `revoked` (where revoking a grant from the page leads)' })
  @ApiSignedInUser()
  @ApiErrors(400)
  async grantsList(@PageQuery('done') done: string | undefined, @LenientRequest() req: FastifyRequest, @Res() reply: FastifyReply): Promise<void> {
    const user = await this.user(req, reply, '/auth/grants');
    if (!user) return;
    const query = await pageQueryOf(req.query);
    const page = await this.grants.page(user.id, query.limit, query.cursor);
    if (this.wantsJson(req)) return void reply.send(page);
    const next = nextPage('/auth/grants', query, page.next_cursor);
    await sendPage(reply, 200, grantsPage({ csrf: await this.forms.csrf(req, reply), grants: page.grants, next, notice: noticeOf(done, ['revoked']) }));
  }

  @ApiExtension('x-error-format', 'html')
  @Get('grants/:id')
  @ApiOperation({ summary: 'One grant of the signed-in user: the app and the scopes it holds (JSON)' })
  @ApiOkResponse({ type: AccountGrant, description: 'The grant: the app and the scopes it holds' })
  @ApiSignedInUser()
  @ApiErrors(400, 404)
  async grant(@Param('id') id: string, @LenientRequest() req: FastifyRequest, @Res() reply: FastifyReply): Promise<void> {
    const user = await this.user(req, reply, '/auth/grants');
    if (!user) return;
    const grant = await this.grants.get(user.id, grantId(id));
    if (!grant) throw ApiError.notFound('not_found', 'No such grant');
    await reply.send(grant);
  }

  @ApiExtension('x-error-format', 'html')
  @Delete('grants/:id')
  @ApiOperation({ summary: 'Revoke a grant of the signed-in user: its tokens stop working at once' })
  @ApiOkResponse({ schema: REVOKED, description: 'Revoked: {id, revoked: true}' })
  @ApiSignedInUser()
  @ApiErrors(400, 404)
  async remove(@Param('id') id: string, @LenientRequest() req: FastifyRequest, @Res() reply: FastifyReply): Promise<void> {
    const user = await this.user(req, reply, '/auth/grants');
    if (!user) return;
    if (!(await this.grants.revoke(user, grantId(id), 'user'))) throw ApiError.notFound('not_found', 'No such grant');
    await reply.send({ id, revoked: true });
  }

  @ApiExtension('x-error-format', 'html')
  @Post('grants/:id/revoke')
  @HttpCode(200)
  @Accepts(FORM, 'application/json')
  @ApiOperation({ summary: 'Revoke a grant (the account page\'s form; JSON callers get {id, revoked})' })
  @ApiFormBody({ csrf: FORM_FIELD.csrf }, [], 'application/json')
  @ApiOkResponse({ schema: REVOKED, description: 'A JSON caller' })
  @ApiSignedInUser({ formPost: true })
  @ApiFormExpiredOrError()
  @ApiPageOrError(404, 'No such grant (already revoked, or not the user\'s): a browser\'s form post gets the "Already revoked" page, linking back to /auth/grants; a JSON caller, not_found')
  @ApiErrors(400)
  async revoke(@Param('id') id: string, @FormFields() body: FormBody, @LenientRequest() req: FastifyRequest, @Res() reply: FastifyReply): Promise<void> {
    const user = await this.user(req, reply, '/auth/grants');
    if (!user) return;
    if (!(await this.formAllowed(req, body))) return this.formExpired(req, reply);
    // A form post naming no grant there could be is shown the page any unknown grant gets; a JSON caller, 400.
    if (!this.formPost(req)) grantId(id);
    if (!isClientId(id) || !(await this.grants.revoke(user, id, 'user'))) {
      if (!this.formPost(req)) throw ApiError.notFound('not_found', 'No such grant');
      const back = { href: '/auth/grants', text: 'Back to connected apps' };
      return sendPage(reply, 404, errorPage('Already revoked', 'This app\'s access was already revoked, or it is not one of your connected apps.', back));
    }
    if (this.wantsJson(req)) return void reply.send({ id, revoked: true });
    await reply.redirect('/auth/grants?done=revoked', 303);
  }

  @ApiExtension('x-error-format', 'html')
  @Get('sessions')
  @ApiOperation({
    summary: 'The signed-in user\'s sign-in sessions for apps, not the account pages\' own sign-in, newest first, a page at a time (HTML, linking to the next page; JSON with Accept: application/json)',
  })
  @ApiResponse({ status: 200, description: 'The sessions page, or {sessions, next_cursor} as JSON', content: { 'text/html': { schema: str }, 'application/json': { schema: { $ref: getSchemaPath(AccountSessionList) } } } })
  @ApiPageQuery()
  @ApiSignedInUser()
  @ApiErrors(400)
  async sessions(@LenientRequest() req: FastifyRequest, @Res() reply: FastifyReply): Promise<void> {
    const user = await this.user(req, reply, '/auth/sessions');
    if (!user) return;
    const query = await pageQueryOf(req.query);
    const page = await this.grants.sessions(user.id, query.limit, query.cursor);
    if (this.wantsJson(req)) return void reply.send(page);
    const next = nextPage('/auth/sessions', query, page.next_cursor);
    await sendPage(reply, 200, sessionsPage({ csrf: await this.forms.csrf(req, reply), sessions: page.sessions, next }));
  }

  @ApiExtension('x-error-format', 'html')
  @Post('sessions/revoke')
  @HttpCode(200)
  @Accepts(FORM, 'application/json')
  @ApiOperation({ summary: 'Sign out everywhere: every sign-in session of the user ends (connected apps keep their grants)' })
  @ApiFormBody({ csrf: FORM_FIELD.csrf }, [], 'application/json')
  @ApiOkResponse({ schema: { type: 'object', properties: { ended: { type: 'integer' } } }, description: 'A JSON caller: how many sessions ended' })
  @ApiSignedInUser({ formPost: true })
  @ApiFormExpiredOrError()
  async endSessions(@FormFields() body: FormBody, @LenientRequest() req: FastifyRequest, @Res() reply: FastifyReply): Promise<void> {
    const user = await this.user(req, reply, '/auth/sessions');
    if (!user) return;
    if (!(await this.formAllowed(req, body))) return this.formExpired(req, reply);
    const ended = await this.grants.endSessions(user);
    clearAccountCookie(reply, this.config.secureCookies);
    if (this.wantsJson(req)) return void reply.send({ ended });
    await reply.redirect('/auth/sign-in?return_to=/auth/sessions&done=signed-out', 303);
  }

  @ApiExtension('x-error-format', 'html')
  @Get('security')
  @ApiOperation({ summary: 'The signed-in user\'s recent security events (HTML)' })
  @ApiPage(200, 'The security events page')
  @ApiSignedInUser()
  async security(@LenientRequest() req: FastifyRequest, @Res() reply: FastifyReply): Promise<void> {
    const user = await this.user(req, reply, '/auth/security');
    if (!user) return;
    await this.securityPage(req, reply, user, 200);
  }

  /** The security page; an admin's has the key form, a fresh showing of it, drawn again with what was sent and its problems (`sent`). */
  private async securityPage(req: FastifyRequest, reply: FastifyReply, user: UserRow, status: number, sent: KeyFormSent = {}): Promise<void> {
    const events = await this.audit.forUser(user.tenant_id, user.id);
    const names = await this.grants.clientNames(events.map((e) => e.client_id));
    await sendPage(
      reply,
      status,
      securityPage({
        email: user.email,
        events: events.map((e) => ({ ...e, client_name: e.client_id ? names.get(e.client_id) : undefined })),
        keyForm: user.role === 'admin' ? { csrf: await this.forms.csrf(req, reply), nonce: this.forms.singleUseNonce(), ...sent } : undefined,
      }),
    );
  }

  @ApiExtension('x-error-format', 'html')
  @Post('keys')
  @HttpCode(200)
  @Accepts(FORM)
  @ApiOperation({ summary: 'An admin user creates an admin API key of their tenant (the security page\'s form, each showing of which makes one key at most); the page shows it once' })
  @ApiFormBody(
    {
      csrf: FORM_FIELD.csrf,
      form_nonce: { type: 'string', description: 'The single-use nonce of this showing of the form' },
      label: { type: 'string', description: 'The first 200 characters are kept (the page\'s field takes no more); the default names the user\'s email' },
      expires_at: {
        type: 'string',
        description: `Optional (empty: never): when the key stops working by itself, as POST /keys' \`expires_at\`, checked as there (in the future, at most ${MAX_KEY_LIFETIME_DAYS} days ahead). The page's \`datetime-local\` field, \`YYYY-MM-DDTHH:MM\` (seconds optional), is read as UTC, the time the pages show; an RFC 3339 date-time with its zone is taken too`,
      },
    },
    ['csrf', 'form_nonce'],
  )
  @ApiPage(200, 'The new key, shown once, with its expiry')
  @ApiPage(400, 'The security page again, the key form holding what was sent and saying what is wrong with the expiry; no key is made')
  @ApiPage(403, 'The signed-in user is not an admin; or "Form expired": the CSRF token or the form nonce is missing or stale')
  @ApiPageOrError(409, '"Form already used": this showing of the form was sent before (a reload, a repeat); no key is made, nor the earlier one shown again. (Or, in the error envelope: conflict, the write lost to concurrent ones)')
  @ApiPageOrError(503, 'Whether the form was used before could not be checked (Redis): no key is made. (Or, in the error envelope: service_unavailable, a dependency is away)')
  @ApiSignedInUser({ formPost: true })
  async createKey(@FormFields() body: FormBody, @LenientRequest() req: FastifyRequest, @Res() reply: FastifyReply): Promise<void> {
    const user = await this.user(req, reply, '/auth/security');
    if (!user) return;
    if (!(await this.forms.valid(req, body.csrf))) return sendPage(reply, 403, formExpiredPage());
    const expiry = await formExpiry(body.expires_at, (at) => this.keys.expiryIssue(at));
    if (expiry.problem) {
      if (user.role !== 'admin') return sendPage(reply, 403, notAllowedPage());
      return this.securityPage(req, reply, user, 400, { label: formText(body.label), expires_at: formText(body.expires_at), problems: [expiry.problem] });
    }
    // One key per showing of the form: its token serves for the whole sign-in, so a reload of the answer, or the form sent twice, would make another.
    const security = { href: '/auth/security', text: 'Back to the security page' };
    switch (await this.forms.spend(body.form_nonce)) {
      case 'malformed':
        return sendPage(reply, 403, formExpiredPage());
      case 'used':
        return sendPage(
          reply,
          409,
          errorPage('Form already used', 'This form was already sent (a reload, or a second click), so no other key was made; a key made the first time is not shown again. To make a new key, use the form on the security page.', security),
        );
      case 'unavailable':
        reply.header('Retry-After', '5');
        return sendPage(reply, 503, errorPage('Try again', 'No key was made: the service could not check that this form was not sent before. Try again in a moment from the security page.', security));
    }
    const given = formText(body.label);
    // A label POST /keys would refuse (a control character, only invisible ones) gives way to the default.
    const label = keyLabel(isReadableName(given) ? given : `${user.email} (account page)`);
    // Recorded as the user's: deleting or demoting them revokes it (KeysService.revokeCreatedBy).
    const created = await this.users.createKey(user.tenant_id, user.id, { role: 'admin', label, expires_at: expiry.at });
    if (!created) return sendPage(reply, 403, notAllowedPage());
    await sendPage(reply, 200, createdKeyPage({ key: created.key!, label, expiresAt: created.expires_at }));
  }

  /**
   * The signed-in user; otherwise a redirect to sign in (a browser's GET), a 401 page with a link
   * to sign in (a browser's form post: the form cannot be sent on), or 401 (JSON, and any other
   * request), and undefined.
   */
  private async user(req: FastifyRequest, reply: FastifyReply, returnTo: string): Promise<UserRow | undefined> {
    // Every answer of these routes is the signed-in user's, JSON included: kept by no cache.
    reply.header('Cache-Control', 'no-store');
    const user = await signedInAs(req, await this.oidc.csrfKey(), (id) => this.users.byId(id));
    if (user) return user;
    const signIn = `/auth/sign-in?return_to=${encodeURIComponent(returnTo)}`;
    if (this.formPost(req)) {
      // RFC 9110 15.5.2: every 401 carries a challenge; the one the JSON answer below carries.
      reply.header('WWW-Authenticate', 'Bearer realm="svc"');
      await sendPage(reply, 401, errorPage('Signed out', 'You are not signed in (any more), so this was not done. Sign in again, then try again.', { href: signIn, text: 'Sign in again' }));
      return undefined;
    }
    if (this.wantsJson(req) || (req.method !== 'GET' && req.method !== 'HEAD')) throw ApiError.unauthorized('Sign in at /auth/sign-in first');
    await reply.redirect(signIn, 303);
    return undefined;
  }

  /** A browser's form post: form-encoded, and not asking for JSON (a JSON caller gets the API's errors). */
  private formPost(req: FastifyRequest): boolean {
    return req.method === 'POST' && /^application\/x-www-form-urlencoded\b/i.test(req.headers['content-type'] ?? '') && !this.wantsJson(req);
  }

  /**
   * A form post needs its CSRF token. A JSON body does not: a cross-site page cannot send one
   * without a CORS preflight, which no origin passes with credentials. `Accept` is no such
   * proof (any page can set it). A JSON body must be an object, as everywhere (400
   * validation_error, after the sign-in check as the API's body checks come after credentials).
   */
  private async formAllowed(req: FastifyRequest, body: FormBody): Promise<boolean> {
    if (!/^application\/json\b/i.test(req.headers['content-type'] ?? '')) return this.forms.valid(req, body.csrf);
    refuseNonObjectJson(req);
    return true;
  }

  /** A form post without its CSRF token: the "Form expired" page, or for a caller that reads JSON, the envelope. */
  private async formExpired(req: FastifyRequest, reply: FastifyReply): Promise<void> {
    if (!this.wantsJson(req)) return sendPage(reply, 403, formExpiredPage());
    throw ApiError.forbidden('A form-encoded body needs the form\'s CSRF token (csrf); a JSON body needs none');
  }

  private wantsJson(req: FastifyRequest): boolean {
    return /application\/json/.test(req.headers.accept ?? '') || /application\/json/.test(req.headers['content-type'] ?? '');
  }
}
