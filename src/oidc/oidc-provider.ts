/**
 * The provider instance, built on first use rather than at start: its signing keys live in
 * the database, which a service started with MIGRATIONS_RUN=false may not have migrated yet.
 */
import { Inject, Injectable, Logger } from '@nestjs/common';
import { AsyncResource } from 'node:async_hooks';
import { InjectDataSource } from '@nestjs/typeorm';
import type { KoaContextWithOIDC, Provider } from 'oidc-provider';
import Redis from 'ioredis';
import { DataSource } from 'typeorm';
import { AuditService, OPEN_REGISTRATION_ACTOR } from '../audit/audit.service';
import { AppConfig } from '../config/app-config';
import { SecretBox } from '../crypto/secret-box';
import { UsersService } from '../users/users.service';
import { OAuthTokenCache } from './oauth-token-cache';
import { inTransaction } from './oidc-adapter';
import { createProvider } from './oidc-provider.factory';
import { OIDC_ROUTES } from './oidc-routes';
import { answerUnavailable } from './provider-errors';
import { revokedGrantAccount } from './grant-revocation';
import { markRoutine } from '../common/request-logging';
import { isDatabaseTrouble } from '../common/unavailable';
import { REDIS } from '../redis/redis.module';
import { routeProviderNotices } from './provider-notices';
import { SigningKeys } from './signing-keys';
import { TokenRequestLimit } from './token-rate-limit';

/** A device's polls while its user has not answered yet (RFC 8628 3.5): its normal course. */
const DEVICE_WAITING = new Set(['authorization_pending', 'slow_down']);

@Injectable()
export class OidcProvider {
  private readonly logger = new Logger('OAuth');
  private instance?: Promise<Provider>;
  private csrf?: Promise<Buffer>;
  /**
   * The context the provider is built in: the service's, not that of the request that first
   * needs it. In that request's, the signing keys' transaction counted as the request's work: it
   * marked an Idempotency-Key applied, and a failure after it left the key unusable for a day.
   */
  private readonly detached = new AsyncResource('OidcProvider.build');

  constructor(
    private readonly config: AppConfig,
    @InjectDataSource() private readonly db: DataSource,
    private readonly secrets: SecretBox,
    private readonly users: UsersService,
    private readonly keys: SigningKeys,
    private readonly tokenCache: OAuthTokenCache,
    private readonly audit: AuditService,
    @Inject(REDIS) private readonly redis: Redis,
  ) {}

  get(): Promise<Provider> {
    this.instance ??= this.detached.runInAsyncScope(() => this.build());
    this.instance.catch(() => (this.instance = undefined));
    return this.instance;
  }

  /** The key of the interaction forms' CSRF tokens (interaction-csrf.ts). */
  csrfKey(): Promise<Buffer> {
    this.csrf ??= this.secrets.derive('oidc-csrf');
    return this.csrf;
  }

  private async build(): Promise<Provider> {
    const { config, db, secrets, users } = this;
    routeProviderNotices(this.logger);
    const tokenLimit = config.RATE_LIMIT_ENABLED ? new TokenRequestLimit(this.redis, config.REDIS_PREFIX, config.RATE_LIMIT_REQUESTS) : undefined;
    const provider = await createProvider({ config, db, secrets, users, keys: await this.keys.load(), cookieKey: await secrets.derive('oidc-cookies'), tokenLimit });
    // Token resolutions are cached (oauth-token-cache.ts): a revocation, or a refused refresh
    // (a reuse revokes the grant), is answered only once every instance will see it.
    provider.use(async (ctx: KoaContextWithOIDC, next: () => Promise<void>) => {
      await next();
      const grantRevoked = (ctx.state as { revocationAudit?: Promise<void> }).revocationAudit;
      await grantRevoked;
      const refused = ctx.oidc?.route === 'token' && ctx.status >= 400 && (ctx.oidc.params as { grant_type?: string } | undefined)?.grant_type === 'refresh_token';
      if (ctx.oidc?.route === 'revocation' || refused || grantRevoked) await this.tokenCache.invalidate();
      if (ctx.oidc?.route === 'token' && DEVICE_WAITING.has((ctx.body as { error?: string } | undefined)?.error ?? '')) markRoutine(ctx.res);
    });
    // Open registration (RFC 7591) makes clients of no tenant, which the root tenant's admins
    // manage: each is recorded in the root tenant's log, in the transaction that stores the
    // client (the provider's save joins it), so a client whose row cannot be written is not made.
    provider.use(async (ctx: KoaContextWithOIDC, next: () => Promise<void>) => {
      if (ctx.method !== 'POST' || ctx.path !== OIDC_ROUTES.registration) return next();
      await inTransaction(this.db, async (m) => {
        await next();
        if (ctx.status !== 201) return;
        const client = ctx.body as { client_id: string; client_name?: string; grant_types?: string[]; token_endpoint_auth_method?: string; scope?: string };
        const [root]: Array<{ id: string }> = await m.query(`SELECT id FROM tenants WHERE is_root`);
        if (!root) return; // no bootstrap yet: no admin to read it
        const { client_name, grant_types, token_endpoint_auth_method, scope } = client;
        // The registrant's address (as the rate limit counts it): the one trace of who made it.
        const details = { actor: OPEN_REGISTRATION_ACTOR, address: ctx.ip, client_name, grant_types, token_endpoint_auth_method, scope };
        await this.audit.record({ tenantId: root.id, action: 'auth.client.created', clientId: client.client_id, details }, m);
      });
    });
    // An error the provider's routes could not name, answered 500 `server_error` and logged by
    // nothing: a dependency away, or a statement past its timeout, is 503 instead
    // (answerUnavailable); anything else is logged with its cause, under the request id the
    // 500's log line carries.
    provider.on('server_error', (ctx: KoaContextWithOIDC, err: unknown) => {
      if (isDatabaseTrouble(err)) return void answerUnavailable(ctx);
      this.logger.error({ err, req: { id: ctx.response.get('x-request-id') || undefined }, route: ctx.oidc?.route }, 'OAuth endpoint failed');
    });
    // Recorded before the response goes out (the middleware above waits for it).
    provider.on('grant.revoked', (ctx: KoaContextWithOIDC, grantId: string) => {
      (ctx.state as { revocationAudit?: Promise<void> }).revocationAudit = this.auditRevocation(ctx, grantId);
    });
    return provider;
  }

  /**
   * `auth.grant.revoked` for a grant the provider revoked (the revocation endpoint; a refresh
   * token's, code's or device code's reuse), once: by the request that deleted it, whose account
   * the adapter kept (the grant is gone by now).
   */
  private async auditRevocation(ctx: KoaContextWithOIDC, grantId: string): Promise<void> {
    try {
      const accountId = revokedGrantAccount(ctx, grantId);
      const user = accountId ? await this.users.byId(accountId) : undefined;
      if (!user) return; // revoked by another request of a race, or its user is gone
      const by = ctx.oidc.route === 'token' ? 'token_reuse' : 'revocation_endpoint';
      await this.audit.record({ tenantId: user.tenant_id, action: 'auth.grant.revoked', clientId: ctx.oidc.client?.clientId, userId: user.id, grantId, details: { by } });
    } catch (err) {
      this.logger.warn({ err, grantId }, 'grant revocation not audited');
    }
  }
}
