/**
 * The user's side of the device flow (SPEC 5.5): `GET /auth/device` asks for the code the
 * device shows (or, with `?user_code=XXX-XXXX`, goes straight on), and shows one page where the
 * user signs in and consents; `POST /auth/device/consent` records the decision on the device
 * code, which the device's next poll turns into tokens (or `access_denied`).
 *
 * CSRF: the GET sets a random cookie (SameSite=Strict, this path only) and the form carries an
 * HMAC of it with the user code; the POST needs both to agree.
 *
 * Either decision needs the user's email and password: without them, anyone who saw the code
 * could deny the device. A client registered for a tenant serves its users only (`servesUser`):
 * another tenant's user is refused, and the device told `access_denied`.
 *
 * One decision per code: a submission first claims the code (`claimDeviceCode`, a conditional
 * UPDATE of its row in oidc_models) and only the one that claims it decides; any other, at the same moment or later,
 * gets "Code expired". Without that, a denial shown as accepted could still let the device in,
 * and two approvals made two grants.
 */
import { Controller, Get, HttpCode, Post, Res } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import { ApiExtension, ApiOperation, ApiTags } from '@nestjs/swagger';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { randomBytes } from 'node:crypto';
import type { Provider } from 'oidc-provider';
import { DataSource } from 'typeorm';
import { Accepts, LenientRequest, Public } from '../auth/decorators';
import { AuditService } from '../audit/audit.service';
import { AppConfig } from '../config/app-config';
import { UsersService } from '../users/users.service';
import { formList as list, grantedScopes, nothingGranted, recordConsent, requestedScopes, scopeDecision, SCOPES_SHOWN } from './consent';
import { FormBody, FormFields, PageQuery, refusedRepeat } from './form-fields';
import { ApiFormBody, ApiPage, ApiQueryParams, FORM_FIELD } from './openapi-pages';
import { cookieOf } from './account-session';
import { csrfToken, csrfValid } from './interaction-csrf';
import { claimDeviceCode, releaseDeviceCode } from './oidc-adapter';
import { OAuthTokenCache } from './oauth-token-cache';
import { OidcProvider } from './oidc-provider';
import { appRefusal } from './blocked-clients';
import { clientRegistration, isSelfRegistered } from './oauth-tokens';
import { accountGonePage, deviceCodePage, deviceConsentPage, errorPage, formExpiredPage, messagePage, otherWorkspacePage, refusedAppReason } from './pages';
import { sendPage } from './send-page';

const COOKIE = 'svc_device_csrf';

type DeviceCode = NonNullable<Awaited<ReturnType<Provider['DeviceCode']['findByUserCode']>>>;

/**
 * `xxx-xxxx`, `XXXXXXX`, ` xxx xxxx `, `ｘｘｘ‐ｘｘｘｘ` → the stored form (upper case, letters only).
 * Full-width letters (an East Asian input method's) are the letters they stand for (NFKC; RFC 8628 6.1).
 */
const normalize = (code: string) => code.normalize('NFKC').toUpperCase().replace(/\W/g, '');
const display = (normalized: string) => `${normalized.slice(0, 3)}-${normalized.slice(3)}`;

/** What a consent form's CSRF token is bound to: this browser (its nonce cookie) and the user code, as one spelling. */
const deviceBinding = (nonce: string, userCode: string): string => `device:${nonce}:${normalize(userCode)}`;

@ApiTags('oauth pages')
@Public()
@Controller('auth/device')
export class DeviceController {
  constructor(
    private readonly oidc: OidcProvider,
    private readonly users: UsersService,
    private readonly audit: AuditService,
    private readonly config: AppConfig,
    private readonly tokenCache: OAuthTokenCache,
    @InjectDataSource() private readonly db: DataSource,
  ) {}

  @ApiExtension('x-error-format', 'html')
  @Get()
  @ApiOperation({ summary: 'Device verification page: enter the code, or `?user_code=XXX-XXXX` to sign in and consent at once (HTML)' })
  @ApiQueryParams({ user_code: 'The code the device shows (XXX-XXXX)' })
  @ApiPage(200, 'The code form, or with a valid user_code the sign-in and consent form')
  @ApiPage(400, 'The code form again: the code is not valid or expired; or a field given more than once')
  async page(@PageQuery('user_code') userCode: string | undefined, @LenientRequest() req: FastifyRequest, @Res() reply: FastifyReply): Promise<void> {
    if (await refusedRepeat(reply, req.query as FormBody, ['user_code'])) return;
    if (userCode === undefined || userCode === '') return sendPage(reply, 200, deviceCodePage({}));
    const code = await this.pending(userCode);
    if (!code) return sendPage(reply, 400, deviceCodePage({ error: 'That code is not valid, or it expired. Check your device and try again.', code: userCode }));
    const nonce = cookieOf(req, COOKIE) ?? randomBytes(18).toString('base64url');
    reply.header('Set-Cookie', `${COOKIE}=${nonce}; Path=/auth/device; HttpOnly; SameSite=Strict${this.config.secureCookies ? '; Secure' : ''}`);
    await sendPage(reply, 200, await this.consentPage(code, await this.csrf(nonce, code.userCode)));
  }

  @ApiExtension('x-error-format', 'html')
  @Post('consent')
  @ApiOperation({ summary: 'Device consent (form-encoded: user_code, csrf, email, password, decision, scope repeated)' })
  @HttpCode(200)
  @Accepts('application/x-www-form-urlencoded')
  @ApiFormBody({ user_code: { type: 'string' }, csrf: FORM_FIELD.csrf, email: FORM_FIELD.email, password: FORM_FIELD.password, decision: FORM_FIELD.decision, scope: FORM_FIELD.scope, scopes_shown: FORM_FIELD.scopes_shown }, ['user_code', 'decision'])
  @ApiPage(200, 'Device connected, or the request denied')
  @ApiPage(400, 'The code is not valid or expired; or a field given more than once')
  @ApiPage(401, 'The form again: wrong email or password (either decision needs them)')
  @ApiPage(403, '"Form expired" (CSRF), or the app belongs to another tenant than the user\'s: the device is told access_denied')
  async consent(@FormFields() body: FormBody, @LenientRequest() req: FastifyRequest, @Res() reply: FastifyReply): Promise<void> {
    if (await refusedRepeat(reply, body, ['user_code', 'csrf', 'email', 'password', 'decision'])) return;
    const code = typeof body.user_code === 'string' ? await this.pending(body.user_code) : undefined;
    const expired = () => sendPage(reply, 400, errorPage('Code expired', 'That code is not valid, or it expired. Start again on your device.'));
    if (!code) return expired();
    const nonce = cookieOf(req, COOKIE);
    if (!nonce || !csrfValid(await this.oidc.csrfKey(), deviceBinding(nonce, code.userCode), body.csrf)) {
      return sendPage(reply, 403, formExpiredPage('Open the link from your device again.'));
    }
    const email = typeof body.email === 'string' ? body.email : '';
    const { user, refusal } = await this.users.authenticate(email, typeof body.password === 'string' ? body.password : '', req.ip);
    // Drawn again with the boxes as the user left them: ticked anew, an Allow after only fixing the password would give what they unticked.
    if (!user) return sendPage(reply, 401, await this.consentPage(code, String(body.csrf), email, refusal, body));
    const provider = await this.oidc.get();
    const client = await provider.Client.find(code.clientId!);
    let refused = await appRefusal(this.db, client, code.clientId!, user);
    const { requested, grantable, granted, givesNothing } = scopeDecision(client, code.params?.scope, user.role, body);
    const denied = body.decision !== 'approve';
    const allowed = !denied && !refused;
    // An Allow that gives nothing connects nothing; the device is told why, not that the user denied
    // (grantsAnything, consent.ts), and a grant given before still loses what was unticked.
    const approve = allowed && !givesNothing;
    const claim = await claimDeviceCode(this.db, code.jti);
    if (!claim) return expired();
    let gone = false;
    try {
      const resource = this.config.baseUrl;
      const recorded = allowed
        ? await recordConsent({ provider, audit: this.audit, db: this.db, tokenCache: this.tokenCache }, {
            tenantId: user.tenant_id,
            accountId: user.id,
            clientId: code.clientId!,
            requested,
            granted,
            resource,
            source: 'device',
            givesNothing: !approve,
          })
        : undefined;
      gone = recorded === 'account_gone';
      // Blocked by the tenant's admins while the user decided (blocked-clients.ts).
      if (recorded === 'client_blocked') refused = { blocked: true };
      if (gone) {
        // The user deleted while deciding: the device is refused, as a deleted user's would be.
        Object.assign(code, { error: 'access_denied', errorDescription: 'The account no longer exists' });
      } else if (!approve || typeof recorded !== 'object') {
        const why = refused ? refusedAppReason(refused.blocked) : denied ? 'The user denied the request' : nothingGranted(grantable);
        Object.assign(code, { error: 'access_denied', errorDescription: why });
      } else {
        Object.assign(code, { accountId: user.id, grantId: recorded.grantId, authTime: Math.floor(Date.now() / 1000), scope: granted.join(' '), resource });
      }
      await code.save();
    } catch (err) {
      // Undecided after all: the user may try again rather than find the code dead.
      await releaseDeviceCode(this.db, code.jti, claim).catch(() => undefined);
      throw err;
    }
    if (refused) {
      return sendPage(reply, 403, otherWorkspacePage({ clientName: client?.clientName ?? code.clientId!, outcome: 'The device was not connected.', blocked: refused.blocked }));
    }
    if (gone) return sendPage(reply, 400, accountGonePage());
    if (denied) return sendPage(reply, 200, messagePage('Not connected', 'You denied the request. You can close this page.'));
    if (!approve) return sendPage(reply, 200, messagePage('Not connected', 'Nothing the app asked for was given to it. You can close this page.'));
    await sendPage(reply, 200, messagePage('Device connected', 'You can close this page and go back to your device.'));
  }

  /** The device code of a user code that still waits for a decision. */
  private async pending(userCode: string): Promise<DeviceCode | undefined> {
    const provider = await this.oidc.get();
    const code = await provider.DeviceCode.findByUserCode(normalize(userCode));
    if (!code || code.isExpired || code.accountId || code.error || code.consumed) return undefined;
    return code;
  }

  /**
   * The page for `code`; drawn again for a form `sent`, the boxes ticked are those it left ticked
   * (of the requested scopes only; what an approval of it would grant, `grantedScopes`). The user
   * is not known then (the sign-in was refused), so every requested scope is shown, as at first:
   * narrowing them to the role of the account the email names would tell its role to someone
   * without its password.
   */
  private async consentPage(code: DeviceCode, csrf: string, email?: string, error?: string, sent?: FormBody): Promise<string> {
    const client = await (await this.oidc.get()).Client.find(code.clientId!);
    const scopes = requestedScopes(client, code.params?.scope);
    return deviceConsentPage({
      userCode: display(code.userCode),
      csrf,
      clientName: client?.clientName ?? code.clientId!,
      scopes,
      extensions: clientRegistration(client).extensions,
      selfRegistered: isSelfRegistered(client) ? {} : undefined,
      email,
      error,
      ticked: sent && grantedScopes(scopes, list(sent.scope), sent[SCOPES_SHOWN] !== undefined),
    });
  }

  private async csrf(nonce: string, userCode: string): Promise<string> {
    return csrfToken(await this.oidc.csrfKey(), deviceBinding(nonce, userCode));
  }
}
