/**
 * The connector OAuth bootstrap (SPEC 5.9) and the connections it makes.
 *
 * `start`: for an integration whose manifest has `oauth`, with a `redirect_uri` on
 * SVC_OAUTH_REDIRECT_ALLOWLIST, sends the user to the upstream's authorize URL with PKCE S256.
 * The `state` is sealed by the service (AES-256-GCM: authenticated, so it cannot be forged or
 * altered, and encrypted, so the PKCE verifier it carries is not readable on the way), expires
 * after STATE_TTL_SECONDS and is used once (a Redis marker).
 * `callback`: opens the state, exchanges the code with the verifier at the upstream's token URL,
 * stores the tokens sealed in a connection of the tenant, and returns the redirect_uri to send
 * the user back to. A tampered, expired or replayed state stores nothing; nor does a flow whose
 * admin credential was revoked or demoted meanwhile.
 * `refresh`: a new access token from the stored refresh token; one refresh of a connection at a
 * time calls the upstream, and others at the same time answer with its result (see there).
 * Token endpoints are called under the same address policy as webhook targets
 * (common/target-policy.ts): no private, loopback or metadata address unless
 * WEBHOOK_ALLOW_PRIVATE_TARGETS allows it, checked where the connection is made; no redirects.
 * Their answers are checked whole before anything is stored (`tokenResponseProblem`); what they
 * say in refusing reaches the user only as an RFC 6749 error code and a description cut short.
 */
import { Inject, Injectable, OnApplicationShutdown } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import Redis from 'ioredis';
import { createHash, randomBytes } from 'node:crypto';
import { setTimeout as delay } from 'node:timers/promises';
import { DataSource } from 'typeorm';
import { errors, type Agent, type Dispatcher } from 'undici';
import { CredentialsService } from '../auth/credentials.service';
import { isAdmin } from '../auth/permissions';
import type { Principal } from '../auth/principal';
import { ApiError, type ErrorCode } from '../common/api-error';
import { isId, newId } from '../common/ids';
import { cutText, textIssue } from '../common/input-policy';
import { decodeCursor, pageOf } from '../common/pagination';
import { AppConfig } from '../config/app-config';
import { guardedAgent, literalAddressProblem, requestErrorText } from '../common/target-policy';
import { SecretBox } from '../crypto/secret-box';
import { REDIS } from '../redis/redis.module';
import { ConnectionList, ConnectionResponse, MAX_UPSTREAM_CODE_LENGTH } from './connections.dto';
import { IntegrationsService } from './integrations.service';
import { Manifest, oauthUrlProblem } from './manifest-schema';
import { normalizeRedirect, redirectAllowlist } from './redirect-allowlist';

const STATE_TTL_SECONDS = 600;
const MAX_TOKEN_RESPONSE_BYTES = 64 * 1024;
const STATE_AAD = 'connector-oauth-state';
const UPSTREAM_TIMEOUT_MS = 10_000;
/** Ten years: beyond any real access token's lifetime, and well within PostgreSQL's timestamps. */
const MAX_EXPIRES_IN_SECONDS = 10 * 365 * 86_400;
/**
 * How long a refresh's claim on a connection holds: well past the upstream call (aborted after
 * UPSTREAM_TIMEOUT_MS) and the store after it, even behind a full pool, so that a refresh still
 * running is never taken over, which would send its refresh token a second time. A claim whose
 * instance died frees the connection after this long.
 */
const REFRESH_CLAIM_MS = 60_000;
/** How long a refresh that found another under way waits for that one's result: as long as the upstream may take, and a little. */
const REFRESH_WAIT_MS = UPSTREAM_TIMEOUT_MS + 5_000;
/** How long a failed refresh's error is kept for the refreshes that waited on it. */
const REFRESH_OUTCOME_SECONDS = 60;
/** The longest error_description the user is sent back with, and the most of an upstream's description repeated in an error. */
const MAX_DESCRIPTION_LENGTH = 500;
/** RFC 6749 4.1.2.1 and 5.2: an error code is 1*( %x20-21 / %x23-5B / %x5D-7E ); a longer one than this is no code either. */
const ERROR_CODE = /^[\x20\x21\x23-\x5B\x5D-\x7E]{1,100}$/;

interface State {
  nonce: string;
  tenantId: string;
  credentialId: string;
  integrationId: string;
  provider: string;
  redirectUri: string;
  verifier: string;
  exp: number;
}

interface ConnectionRow {
  tenant_id: string;
  id: string;
  integration_id: string;
  provider: string;
  access_token_sealed: string;
  refresh_token_sealed: string | null;
  token_type: string | null;
  scope: string | null;
  expires_at: Date | null;
  created_at: Date;
  refreshed_at: Date | null;
  refresh_claim: string | null;
  refresh_claimed_until: Date | null;
}

/** A token response that passed `tokenResponseProblem` (null stands for absent, as some upstreams send it). */
interface UpstreamTokens {
  access_token: string;
  refresh_token?: string | null;
  token_type?: string | null;
  scope?: string | null;
  expires_in?: number | null;
}

const invalidRequest = (message: string) => ApiError.badRequest('invalid_request', message);
export const tokenAad = (tenantId: string, id: string, which: 'access' | 'refresh') => `connection:${tenantId}:${id}:${which}`;
const toConnection = (r: ConnectionRow): ConnectionResponse => ({
  id: r.id,
  integration_id: r.integration_id,
  provider: r.provider,
  scope: r.scope,
  token_type: r.token_type,
  expires_at: r.expires_at?.toISOString() ?? null,
  has_refresh_token: r.refresh_token_sealed !== null,
  created_at: r.created_at.toISOString(),
  refreshed_at: r.refreshed_at?.toISOString() ?? null,
});

/**
 * The manifest's OAuth client id. RFC 6749 has every authorization and token request name its
 * client, and registration requires one; a manifest stored before it did may lack it, and such
 * an integration cannot connect until a version with one is registered: no request goes out
 * with an empty client_id. (Its connections' refresh looks further: `refreshClientId`.)
 */
function clientIdOf(manifest: Manifest, newer?: { clientId?: string; tokenUrl: string }): string {
  const clientId = manifest.oauth?.client_id || newer?.clientId;
  if (clientId) return clientId;
  const needed = newer ? `one and the same oauth.token_url (${newer.tokenUrl}), where its connections' refresh tokens were issued` : 'one';
  throw invalidRequest(`Integration ${manifest.name} ${manifest.version} has no oauth.client_id; register a new version of its manifest with ${needed}`);
}

const cut = (text: string): string => cutText(text, MAX_DESCRIPTION_LENGTH);

/** An upstream's error code, if it is one (RFC 6749's characters, at most 100): anything else is not repeated to the user as a code. */
function upstreamErrorCode(value: unknown): string | undefined {
  return typeof value === 'string' && ERROR_CODE.test(value) ? value : undefined;
}

/** The redirect_uri with an RFC 6749 4.1.2.1 error, for the user's browser. */
function withError(back: URL, error: string, description: string): string {
  back.searchParams.set('error', error);
  back.searchParams.set('error_description', cut(description));
  return back.toString();
}

/**
 * Why an upstream's successful token response (RFC 6749 5.1) cannot be stored, or undefined: it
 * comes from outside and goes into sealed strings, text columns and a timestamp, so each field
 * must be what those hold, unchanged (the input policy's text rule: PostgreSQL text cannot hold
 * NUL, and an unpaired surrogate would be stored as U+FFFD, a token the upstream never issued
 * sent back at the next refresh); an expires_in out of range is no date. The reasons name
 * fields, never their values (tokens).
 */
function tokenResponseProblem(body: Record<string, unknown>): string | undefined {
  if (typeof body.access_token !== 'string' || !body.access_token) return 'access_token is missing or not a non-empty string';
  for (const name of ['access_token', 'refresh_token', 'token_type', 'scope']) {
    const value = body[name];
    if (value === undefined || value === null) continue;
    if (typeof value !== 'string') return `${name} is not a string`;
    const issue = textIssue(value);
    if (issue) return `${name} ${issue}`;
  }
  const expiresIn = body.expires_in;
  if (expiresIn !== undefined && expiresIn !== null && !(typeof expiresIn === 'number' && expiresIn >= 0 && expiresIn <= MAX_EXPIRES_IN_SECONDS)) {
    return `expires_in is not a number of seconds from 0 to ${MAX_EXPIRES_IN_SECONDS}`;
  }
  return undefined;
}

@Injectable()
export class ConnectionsService implements OnApplicationShutdown {
  private readonly allowlist: Set<string>;
  private readonly upstream: Agent;

  constructor(
    @InjectDataSource() private readonly db: DataSource,
    @Inject(REDIS) private readonly redis: Redis,
    private readonly secrets: SecretBox,
    private readonly integrations: IntegrationsService,
    private readonly credentials: CredentialsService,
    private readonly config: AppConfig,
  ) {
    this.allowlist = redirectAllowlist(config.SVC_OAUTH_REDIRECT_ALLOWLIST);
    // A token response is a few hundred bytes: a larger one is not read whole (it counts as not valid).
    this.upstream = guardedAgent(config.allowPrivateWebhookTargets, { maxResponseSize: MAX_TOKEN_RESPONSE_BYTES });
  }

  /** After the HTTP server has closed: a refresh in flight finishes first. */
  async onApplicationShutdown(): Promise<void> {
    await this.upstream.destroy();
  }

  callbackUrl(provider: string): string {
    return `${this.config.baseUrl}/oauth/callback/${encodeURIComponent(provider)}`;
  }

  /** The upstream authorize URL to send the user to. */
  async start(p: Principal, integrationId: string, redirectUri: string): Promise<string> {
    const integration = await this.integrations.get(integrationId);
    const manifest = integration.manifest as unknown as Manifest;
    if (!manifest.oauth) throw invalidRequest(`Integration ${manifest.name} does not connect with OAuth`);
    const clientId = clientIdOf(manifest);
    // As token_url before each token request: a manifest stored under an older rule may break it.
    const insecure = oauthUrlProblem(manifest.oauth.authorize_url);
    if (insecure) throw invalidRequest(`Integration ${manifest.name} ${manifest.version} has an oauth.authorize_url that breaks the rule (it ${insecure}); register a new version of its manifest with one that keeps it`);
    const normalized = normalizeRedirect(redirectUri);
    if (!normalized || !this.allowlist.has(normalized)) throw invalidRequest('redirect_uri is not on the service\'s redirect allowlist');
    const verifier = randomBytes(32).toString('base64url');
    const state: State = {
      nonce: randomBytes(16).toString('base64url'),
      tenantId: p.tenantId,
      credentialId: p.credentialId,
      integrationId: integration.id,
      provider: manifest.name,
      redirectUri: normalized,
      verifier,
      exp: Math.floor(Date.now() / 1000) + STATE_TTL_SECONDS,
    };
    const url = new URL(manifest.oauth.authorize_url);
    const params: Record<string, string> = {
      response_type: 'code',
      client_id: clientId,
      redirect_uri: this.callbackUrl(manifest.name),
      state: await this.secrets.seal(JSON.stringify(state), STATE_AAD),
      code_challenge: createHash('sha256').update(verifier).digest('base64url'),
      code_challenge_method: 'S256',
      ...(manifest.oauth.scopes?.length ? { scope: manifest.oauth.scopes.join(' ') } : {}),
    };
    for (const [k, v] of Object.entries(params)) url.searchParams.set(k, v);
    return url.toString();
  }

  /**
   * Completes the flow; answers where to send the user (the redirect_uri, with `connection_id`,
   * or with `error` when the upstream refused). A bad state is 400 and stores nothing.
   */
  async callback(provider: string, q: { code?: string; state?: string; error?: string; error_description?: string }): Promise<string> {
    const state = await this.openState(q.state, provider);
    const back = new URL(state.redirectUri);
    if (q.error) return withError(back, upstreamErrorCode(q.error) ?? 'server_error', q.error_description ?? 'The upstream refused');
    if (!q.code) return withError(back, 'invalid_request', 'The upstream sent neither a code nor an error');
    if (q.code.length > MAX_UPSTREAM_CODE_LENGTH) return withError(back, 'invalid_request', `The upstream sent a code over ${MAX_UPSTREAM_CODE_LENGTH} characters`);
    // The connection is made on the authority of the admin who started the flow, as that
    // credential is now: one revoked (SPEC 4.5: at once) or demoted since connects nothing.
    const starter = await this.credentials.principalById(state.tenantId, state.credentialId);
    if (!starter || !isAdmin(starter)) return withError(back, 'access_denied', 'The credential that started this connection was revoked or is no longer an admin');
    const integration = await this.integrations.get(state.integrationId);
    const manifest = integration.manifest as unknown as Manifest;
    let tokens: UpstreamTokens;
    try {
      tokens = await this.tokenRequest(manifest, {
        grant_type: 'authorization_code',
        code: q.code,
        redirect_uri: this.callbackUrl(provider),
        code_verifier: state.verifier,
        client_id: clientIdOf(manifest),
      });
    } catch (err) {
      if (!(err instanceof ApiError)) throw err;
      // The user is in a browser on the way back to the app: send them on with the reason.
      return withError(back, err.status === 502 ? 'temporarily_unavailable' : (upstreamErrorCode(err.details?.upstream_error) ?? 'server_error'), err.message);
    }
    const id = newId();
    await this.db.query(
      `INSERT INTO connections (tenant_id, id, integration_id, provider, access_token_sealed, refresh_token_sealed, token_type, scope, expires_at, created_by)
       VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)`,
      [
        state.tenantId, id, state.integrationId, provider,
        await this.secrets.seal(tokens.access_token, tokenAad(state.tenantId, id, 'access')),
        tokens.refresh_token ? await this.secrets.seal(tokens.refresh_token, tokenAad(state.tenantId, id, 'refresh')) : null,
        tokens.token_type ?? null, tokens.scope ?? null, this.expiry(tokens), state.credentialId,
      ],
    );
    back.searchParams.set('connection_id', id);
    return back.toString();
  }

  async list(p: Principal, q: { limit?: number; cursor?: string }): Promise<ConnectionList> {
    const limit = q.limit ?? 50;
    const after = decodeCursor(q.cursor, 'connections');
    const rows: ConnectionRow[] = await this.db.query(
      `SELECT * FROM connections WHERE tenant_id = $1 AND ($2::timestamptz IS NULL OR (created_at, id) < ($2, $3::uuid))
        ORDER BY created_at DESC, id DESC LIMIT $4`,
      [p.tenantId, after?.createdAt ?? null, after?.id ?? null, limit + 1],
    );
    const { page, next_cursor } = pageOf(rows, limit, (r) => r.created_at, 'connections');
    return { connections: page.map(toConnection), next_cursor };
  }

  /** One connection of the caller's tenant, without its tokens; another tenant's is 404 as a missing one. */
  async get(p: Principal, id: string): Promise<ConnectionResponse> {
    return toConnection(await this.connectionRow(p.tenantId, id));
  }

  async remove(p: Principal, id: string): Promise<ConnectionResponse> {
    const [rows]: [ConnectionRow[], number] = await this.db.query(`DELETE FROM connections WHERE tenant_id = $1 AND id = $2 RETURNING *`, [p.tenantId, id]);
    if (!rows[0]) throw ApiError.notFound('not_found', 'No such connection');
    return toConnection(rows[0]);
  }

  /**
   * A new access token from the stored refresh token (the upstream may rotate the refresh token too).
   * An upstream that rotates strictly accepts a refresh token once and may revoke the whole family
   * when it sees it again, so two refreshes at once must never both send the stored one. A refresh
   * first claims the connection (one statement: `refresh_claim`, until REFRESH_CLAIM_MS from now),
   * calls the upstream holding no database connection or lock, and stores what it got only while
   * the claim is still its own, so that one whose claim lapsed cannot overwrite newer tokens. One
   * that finds the connection claimed does not call the upstream: it waits for that refresh and
   * answers as it did, with the tokens it stored or the error it got (409 `conflict` when that is
   * not known in time).
   */
  async refresh(p: Principal, id: string): Promise<ConnectionResponse> {
    const seen = await this.connectionRow(p.tenantId, id);
    if (!seen.refresh_token_sealed) throw invalidRequest('This connection has no refresh token');
    const manifest = (await this.integrations.get(seen.integration_id)).manifest as unknown as Manifest;
    const clientId = await this.refreshClientId(manifest);
    const claim = newId();
    for (;;) {
      const [[claimed]]: [ConnectionRow[], number] = await this.db.query(
        `UPDATE connections SET refresh_claim = $3, refresh_claimed_until = now() + $4 * interval '1 millisecond'
          WHERE tenant_id = $1 AND id = $2 AND (refresh_claimed_until IS NULL OR refresh_claimed_until <= now()) RETURNING *`,
        [p.tenantId, id, claim, REFRESH_CLAIM_MS],
      );
      if (claimed) return this.refreshClaimed(p, claimed, manifest, clientId);
      const [other]: Array<ConnectionRow & { live: boolean }> = await this.db.query(
        `SELECT *, refresh_claimed_until > now() AS live FROM connections WHERE tenant_id = $1 AND id = $2`,
        [p.tenantId, id],
      );
      if (!other) throw ApiError.notFound('not_found', 'No such connection');
      if (other.live) return this.awaitRefresh(p, other);
      // The claim was let go between the two statements: by a refresh that stored new tokens
      // since this one came, which answer it, or by one that failed, after which it may claim.
      if (other.access_token_sealed !== seen.access_token_sealed) return toConnection(other);
    }
  }

  /**
   * The client id a connection's refresh names: its own version's. One made under a version
   * without one (stored before registration required it) takes that of the newest version of the
   * same name that has one and the same token_url: the refresh still goes to its own version's
   * token_url, where its refresh token was issued, and a client id means something only at its
   * own authorization server, so a version that moved to another upstream lends none.
   */
  private async refreshClientId(manifest: Manifest): Promise<string> {
    const oauth = manifest.oauth;
    if (!oauth || oauth.client_id) return clientIdOf(manifest);
    return clientIdOf(manifest, { clientId: await this.integrations.newestClientId(manifest.name, oauth.token_url), tokenUrl: oauth.token_url });
  }

  private async refreshClaimed(p: Principal, row: ConnectionRow, manifest: Manifest, clientId: string): Promise<ConnectionResponse> {
    const claim = row.refresh_claim!;
    let tokens: UpstreamTokens;
    try {
      const refreshToken = await this.secrets.open(row.refresh_token_sealed!, tokenAad(p.tenantId, row.id, 'refresh'));
      tokens = await this.tokenRequest(manifest, { grant_type: 'refresh_token', refresh_token: refreshToken, client_id: clientId });
    } catch (err) {
      // For the refreshes waiting on this one, before they see the claim let go.
      if (err instanceof ApiError) {
        const outcome = JSON.stringify({ status: err.status, ...err.toEnvelope().error });
        await this.redis.set(this.outcomeKey(claim), outcome, 'EX', REFRESH_OUTCOME_SECONDS).catch(() => undefined);
      }
      // Left held, the claim lapses by itself after REFRESH_CLAIM_MS: this refresh's error says more than a failure here.
      await this.db
        .query(`UPDATE connections SET refresh_claim = NULL, refresh_claimed_until = NULL WHERE tenant_id = $1 AND id = $2 AND refresh_claim = $3`, [p.tenantId, row.id, claim])
        .catch(() => undefined);
      throw err;
    }
    // In a transaction of its own, which marks an Idempotency-Key applied as it commits
    // (claim-applied.ts): the claim above and the upstream call are not the work, storing is.
    const sealedAccess = await this.secrets.seal(tokens.access_token, tokenAad(p.tenantId, row.id, 'access'));
    const sealedRefresh = tokens.refresh_token ? await this.secrets.seal(tokens.refresh_token, tokenAad(p.tenantId, row.id, 'refresh')) : null;
    const [[updated]]: [ConnectionRow[], number] = await this.db.transaction((m) => m.query(
      `UPDATE connections SET access_token_sealed = $4, refresh_token_sealed = coalesce($5, refresh_token_sealed), token_type = coalesce($6, token_type),
              scope = coalesce($7, scope), expires_at = $8, refreshed_at = now(), refresh_claim = NULL, refresh_claimed_until = NULL
        WHERE tenant_id = $1 AND id = $2 AND refresh_claim = $3 RETURNING *`,
      [p.tenantId, row.id, claim, sealedAccess, sealedRefresh, tokens.token_type ?? null, tokens.scope ?? null, this.expiry(tokens)],
    ));
    if (updated) return toConnection(updated);
    await this.connectionRow(p.tenantId, row.id);
    throw ApiError.conflict('conflict', 'This refresh took longer than its claim on the connection and another refresh took it over: the tokens it got were not stored; those of the other stand');
  }

  /**
   * Waits for the refresh holding `claimed`'s claim, holding no database connection between
   * looks, and answers as it did: the connection with the tokens it stored, or its error.
   */
  private async awaitRefresh(p: Principal, claimed: ConnectionRow): Promise<ConnectionResponse> {
    const deadline = Date.now() + REFRESH_WAIT_MS;
    for (let pause = 50; Date.now() < deadline; pause = Math.min(pause * 2, 1000)) {
      await delay(Math.min(pause, Math.max(deadline - Date.now(), 0)));
      const row = await this.connectionRow(p.tenantId, claimed.id);
      if (row.access_token_sealed !== claimed.access_token_sealed) return toConnection(row);
      if (row.refresh_claim === claimed.refresh_claim) continue;
      const outcome = await this.redis.get(this.outcomeKey(claimed.refresh_claim!)).catch(() => null);
      if (outcome) {
        const { status, code, message, details } = JSON.parse(outcome) as { status: number; code: ErrorCode; message: string; details?: Record<string, unknown> };
        throw new ApiError(status, code, message, details);
      }
      throw ApiError.busy('A refresh of this connection under way when this one came did not finish; this one did not call the upstream again: try again');
    }
    throw ApiError.busy('A refresh of this connection is under way and has not finished; try again later');
  }

  private outcomeKey(claim: string): string {
    return `${this.config.REDIS_PREFIX}connection-refresh:${claim}`;
  }

  private async connectionRow(tenantId: string, id: string): Promise<ConnectionRow> {
    const [row]: ConnectionRow[] = await this.db.query(`SELECT * FROM connections WHERE tenant_id = $1 AND id = $2`, [tenantId, id]);
    if (!row) throw ApiError.notFound('not_found', 'No such connection');
    return row;
  }

  private expiry(tokens: UpstreamTokens): Date | null {
    return typeof tokens.expires_in === 'number' ? new Date(Date.now() + tokens.expires_in * 1000) : null;
  }

  /** The state, if it is this service's, unexpired, for this provider, and not used before. */
  private async openState(sealed: string | undefined, provider: string): Promise<State> {
    let state: State;
    try {
      state = JSON.parse(await this.secrets.open(String(sealed ?? ''), STATE_AAD)) as State;
    } catch {
      throw invalidRequest('The state is not one this service issued');
    }
    if (state.exp < Date.now() / 1000) throw invalidRequest('The state has expired; start again');
    if (state.provider !== provider || !isId(state.integrationId)) throw invalidRequest('The state belongs to another provider');
    const first = await this.redis.set(`${this.config.REDIS_PREFIX}connector-state:${state.nonce}`, '1', 'EX', STATE_TTL_SECONDS, 'NX');
    if (first !== 'OK') throw invalidRequest('The state was used already; start again');
    return state;
  }

  private async tokenRequest(manifest: Manifest, form: Record<string, string>): Promise<UpstreamTokens> {
    // Not `invalid_grant`, which SPEC 7 makes a 400 about the grant: the grant may be fine, the upstream is not there.
    const unreachable = (why: string) => new ApiError(502, 'upstream_unavailable', `The upstream token endpoint could not be used (${why})`);
    // Manifests registered before the rule was checked on parsed URLs may still break it.
    const insecure = oauthUrlProblem(manifest.oauth!.token_url);
    if (insecure) throw unreachable(`refused: the manifest's token_url ${insecure}`);
    const url = new URL(manifest.oauth!.token_url);
    const refused = literalAddressProblem(url, this.config.allowPrivateWebhookTargets);
    if (refused) throw unreachable(refused);
    let res: Dispatcher.ResponseData;
    try {
      res = await this.upstream.request({
        origin: url.origin,
        path: url.pathname + url.search,
        method: 'POST',
        headers: { 'content-type': 'application/x-www-form-urlencoded', accept: 'application/json' },
        body: new URLSearchParams(form).toString(),
        signal: AbortSignal.timeout(UPSTREAM_TIMEOUT_MS),
      });
    } catch (err) {
      throw unreachable(requestErrorText(err as Error));
    }
    let text: string | undefined;
    let overLimit = false;
    try {
      text = await res.body.text();
    } catch (err) {
      // A body over the limit is an answer, and not a valid one. Anything else (the timeout while
      // the body trickles in, a reset) is the upstream failing on the way, whatever its status said.
      if (!(err instanceof errors.ResponseExceededMaxSizeError)) throw unreachable(requestErrorText(err as Error));
      overLimit = true;
    }
    // 429 says nothing about the grant either: the upstream is limiting this client for now. Nor
    // does a redirect, which is not followed: the endpoint moved, or is not the token endpoint.
    if (res.statusCode >= 500 || res.statusCode === 429) throw unreachable(`answered ${res.statusCode}`);
    if (res.statusCode >= 300 && res.statusCode < 400) throw unreachable(`answered ${res.statusCode}, a redirect, which is not followed`);
    let parsed: unknown;
    try {
      parsed = text === undefined ? undefined : JSON.parse(text);
    } catch {
      parsed = undefined;
    }
    const body = (parsed !== null && typeof parsed === 'object' && !Array.isArray(parsed) ? parsed : {}) as Record<string, unknown>;
    const ok = res.statusCode >= 200 && res.statusCode < 300;
    const refusal = typeof body.error === 'string' && body.error !== '';
    if (!ok || (refusal && body.access_token === undefined)) {
      // Only a code in RFC 6749's characters is repeated, and at most MAX_DESCRIPTION_LENGTH of the description.
      const upstreamError = upstreamErrorCode(body.error);
      const description = typeof body.error_description === 'string' && body.error_description ? ` (${cut(body.error_description)})` : '';
      const reason = `${upstreamError ?? `answered ${res.statusCode}`}${description}`;
      throw ApiError.badRequest('invalid_grant', `The upstream refused the exchange: ${reason}`, upstreamError ? { upstream_error: upstreamError } : undefined);
    }
    // The upstream's failure, answered as its refusals are (the callback sends server_error); nothing is stored.
    const problem = overLimit ? `its body is over ${MAX_TOKEN_RESPONSE_BYTES / 1024} KiB` : tokenResponseProblem(body);
    if (problem) throw ApiError.badRequest('invalid_grant', `The upstream's token response was not valid: ${problem}`);
    return body as unknown as UpstreamTokens;
  }
}
