/**
 * The account pages' sign-in (GET and POST /auth/sign-in without an app, handed over by
 * interactions.controller.ts), which sets the account cookie (account-session.ts), and the CSRF
 * tokens of the account forms: an HMAC bound to a random nonce cookie (SameSite=Strict) and to
 * the account cookie the browser is signed in with. The nonce alone would not do: someone who
 * can plant cookies for the host (a sibling subdomain, plain HTTP) could plant their own nonce
 * beside the victim's account cookie and post with the matching token.
 *
 * Those tokens serve for as long as the sign-in (12 hours), however often they are sent. A form
 * that must act once per showing (the key form: a reload of its answer would make another key)
 * also carries a single-use nonce (`singleUseNonce`), spent in Redis when the form is sent (`spend`).
 */
import { Inject, Injectable } from '@nestjs/common';
import type { FastifyReply, FastifyRequest } from 'fastify';
import Redis from 'ioredis';
import { randomBytes } from 'node:crypto';
import { withinTimeout } from '../common/timeout';
import { AppConfig } from '../config/app-config';
import { REDIS, REDIS_WAIT_MS } from '../redis/redis.module';
import { MAX_EMAIL_LENGTH } from '../users/users.dto';
import { UserRow, UsersService } from '../users/users.service';
import { ACCOUNT_COOKIE, cookieOf, setAccountCookie } from './account-session';
import { csrfToken, csrfValid } from './interaction-csrf';
import { OidcProvider } from './oidc-provider';
import { formExpiredPage, noticeOf, signInPage } from './pages';
import { sendPage } from './send-page';

const NONCE = 'svc_form_nonce';

/**
 * How long a spent nonce is remembered: longer than the account cookie lives (12 hours), and so
 * than the form's CSRF token, bound to that cookie, is accepted with it.
 */
const SPENT_TTL_SECONDS = 13 * 3600;
const SINGLE_USE_NONCE = /^[A-Za-z0-9_-]{24}$/;

/** A single-use nonce sent back: `fresh` the first time, `used` after; `malformed` when it is none; `unavailable` when Redis could not tell. */
export type Spent = 'fresh' | 'used' | 'malformed' | 'unavailable';

/** What a form's token is bound to: the nonce, and the account cookie (none before signing in). */
const formSubject = (req: FastifyRequest, nonce: string) => `account-form:${nonce}:${cookieOf(req, ACCOUNT_COOKIE) ?? ''}`;

/** Only the account pages are places to return to after signing in. */
const safeReturn = (to: unknown) => (typeof to === 'string' && /^\/auth\/(grants|sessions|security)(\/[\w-]*)?$/.test(to) ? to : '/auth/grants');

@Injectable()
export class AccountForms {
  constructor(
    private readonly oidc: OidcProvider,
    private readonly users: UsersService,
    private readonly config: AppConfig,
    @Inject(REDIS) private readonly redis: Redis,
  ) {}

  /** GET /auth/sign-in without an app. */
  async signInForm(req: FastifyRequest, reply: FastifyReply, returnTo: unknown, error?: string, email?: string): Promise<void> {
    // A confirmation only on the form's first showing (after signing out everywhere), not over a refusal.
    const notice = error ? undefined : noticeOf((req.query as Record<string, unknown> | undefined)?.done, ['signed-out']);
    await sendPage(reply, error ? 401 : 200, signInPage({ returnTo: safeReturn(returnTo), csrf: await this.csrf(req, reply), error, email, notice }));
  }

  /** POST /auth/sign-in without an app. */
  async signIn(req: FastifyRequest, reply: FastifyReply, body: Record<string, unknown>): Promise<void> {
    if (!(await this.valid(req, body.csrf))) return sendPage(reply, 403, formExpiredPage());
    const email = typeof body.email === 'string' ? body.email : '';
    const { user, refusal } = await this.users.authenticate(email, typeof body.password === 'string' ? body.password : '', req.ip);
    // The email typed is shown again, unless it is longer than any account's.
    if (!user) return this.signInForm(req, reply, body.return_to, refusal, email.length <= MAX_EMAIL_LENGTH ? email : undefined);
    await this.signInAs(reply, user, safeReturn(body.return_to));
  }

  /** Sets the account cookie and sends the browser on. */
  async signInAs(reply: FastifyReply, user: UserRow, to: string): Promise<void> {
    setAccountCookie(reply, await this.oidc.csrfKey(), user, this.config.secureCookies);
    await reply.redirect(to, 303);
  }

  /** A CSRF token bound to this browser's form nonce cookie (set here when missing). */
  async csrf(req: FastifyRequest, reply: FastifyReply): Promise<string> {
    let nonce = cookieOf(req, NONCE);
    if (!nonce) {
      nonce = randomBytes(18).toString('base64url');
      reply.header('Set-Cookie', `${NONCE}=${nonce}; Path=/auth; HttpOnly; SameSite=Strict${this.config.secureCookies ? '; Secure' : ''}`);
    }
    return csrfToken(await this.oidc.csrfKey(), formSubject(req, nonce));
  }

  async valid(req: FastifyRequest, token: unknown): Promise<boolean> {
    const nonce = cookieOf(req, NONCE);
    return nonce !== undefined && csrfValid(await this.oidc.csrfKey(), formSubject(req, nonce), token);
  }

  /** A new single-use nonce, for one showing of a form (a hidden field beside its CSRF token). */
  singleUseNonce(): string {
    return randomBytes(18).toString('base64url');
  }

  /**
   * Spends a single-use nonce a form sent (after its CSRF token verified): SET NX, atomic, so of
   * the same form sent several times, at once or later, one is `fresh`. Redis away or slow is
   * `unavailable`, never `fresh`: the caller refuses rather than act twice unknowingly.
   */
  async spend(nonce: unknown): Promise<Spent> {
    if (typeof nonce !== 'string' || !SINGLE_USE_NONCE.test(nonce)) return 'malformed';
    if (this.redis.status !== 'ready') return 'unavailable';
    const set = this.redis.set(`${this.config.REDIS_PREFIX}account-form:spent:${nonce}`, '1', 'EX', SPENT_TTL_SECONDS, 'NX');
    const answer = await withinTimeout(set, REDIS_WAIT_MS);
    return answer === 'OK' ? 'fresh' : answer === null ? 'used' : 'unavailable';
  }
}
