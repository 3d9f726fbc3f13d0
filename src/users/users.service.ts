/**
 * Owns users: the people who sign in to the OAuth provider and consent for apps. Admins of a
 * tenant create, list, change and delete its users, each change audited (`user.*`) in its
 * transaction; the provider looks them up by email (sign-in, with the password check and its
 * throttle, sign-in-throttle.ts) and by id (the OIDC `sub`); an admin user makes admin API keys
 * on the account pages (`createKey`). An admin may disable a user (suspend without deleting),
 * until a time they give or indefinitely, and enable them again: a disabled user is, to the
 * provider, no user (`USABLE_USER`), and every read shows whether they are disabled now (`DISABLED_NOW`).
 */
import { Inject, Injectable } from '@nestjs/common';
import Redis from 'ioredis';
import { InjectDataSource } from '@nestjs/typeorm';
import { DataSource, EntityManager } from 'typeorm';
import { actorOf, AuditActor, AuditService, changedFields } from '../audit/audit.service';
import type { Principal } from '../auth/principal';
import { ApiError } from '../common/api-error';
import { laterInstantIssue, msAheadOfDatabase } from '../common/db-clock';
import { newId } from '../common/ids';
import { decodeCursor, pageOf } from '../common/pagination';
import { isUniqueViolation } from '../common/unavailable';
import { validationError } from '../common/validation';
import { AppConfig } from '../config/app-config';
import { SecretBox } from '../crypto/secret-box';
import { bumpGeneration, OAUTH_GENERATION } from '../keys/key-cache';
import { ApiKeyResponse, CreateKeyDto } from '../keys/keys.dto';
import { KeysService } from '../keys/keys.service';
import { endAccounts, endProviderSessions } from '../oidc/oidc-adapter';
import { REDIS } from '../redis/redis.module';
import { insertTenant } from '../tenants/tenant.entity';
import { hashPassword, verifyAgainstNothing, verifyPassword } from './password';
import { SignInThrottle } from './sign-in-throttle';
import { WRONG_PASSWORD } from './sign-in-refusal';
import { DISABLED_NOW, USABLE_USER } from './usable-user';
import { CreateUserDto, ListUsersQuery, MAX_DISABLED_DAYS, MAX_EMAIL_LENGTH, UpdateUserDto, UserList, UserResponse, UserRole } from './users.dto';

export interface UserRow {
  tenant_id: string;
  id: string;
  email: string;
  name: string;
  role: UserRole;
  picture: string | null;
  email_verified: boolean;
  created_at: Date;
  updated_at: Date;
  /** How many times the user signed out everywhere (a bigint, as text): account cookies of an earlier epoch are void (account-session.ts). */
  session_epoch: string;
  /** Disabled now (`DISABLED_NOW`): false once a disablement's `disabled_until` has passed, and then its reason and end read as null. */
  disabled: boolean;
  disabled_reason: string | null;
  disabled_until: Date | null;
}

/** The fields of a user an update may change that an audit row names by value change (a new password always counts). */
const AUDITED_FIELDS = ['name', 'role', 'picture', 'email_verified', 'disabled', 'disabled_reason', 'disabled_until'] as const;

/** What a change that would end the calling key, one its user made, does to that user, by the field that asks for it (`assertNotCallersMaker`). */
const SELF_ENDING = { disabled: 'disable', role: 'demote', id: 'delete' } as const;

/** A user as they are now: a disablement whose end has passed reads as none, its reason and end with it (`DISABLED_NOW`). */
const USER_COLUMNS = `tenant_id, id, email, name, role, picture, email_verified, created_at, updated_at, session_epoch, ${DISABLED_NOW} AS disabled,
  CASE WHEN ${DISABLED_NOW} THEN users.disabled_reason END AS disabled_reason, CASE WHEN ${DISABLED_NOW} THEN users.disabled_until END AS disabled_until`;

/** A sign-in's answer: the user, or what the form tells the person (the same for an unknown email as for a wrong password). */
export type SignIn = { user: UserRow; refusal?: undefined } | { user?: undefined; refusal: string };

/** What goes with a disablement, as a write gives it (null removes one) and as a user has it. */
type Disablement<T = string> = { disabled_reason: string | null; disabled_until: T | null };

/**
 * The `disabled_reason` and `disabled_until` a user has after a write, read in `m`: those `given`
 * (a string, or null to remove it) while they are disabled (`disabled`, as the write leaves them),
 * else those `kept`; none once enabled, so that neither outlives the suspension it was about.
 * Either one for a user left enabled is 400, and so is an end not in the future by the database's
 * clock (`DISABLED_NOW` judges it by that clock), or more than MAX_DISABLED_DAYS ahead.
 */
async function disablementOf(
  m: Pick<EntityManager, 'query'>,
  disabled: boolean,
  given: Partial<Disablement>,
  kept: Disablement<string | Date>,
): Promise<Disablement<string | Date>> {
  const fields = ['disabled_reason', 'disabled_until'] as const;
  if (!disabled) {
    const stray = fields.filter((f) => typeof given[f] === 'string');
    if (stray.length) throw validationError(stray.map((field) => ({ field, message: 'goes only with a disabled user: send "disabled": true with it' })));
    return { disabled_reason: null, disabled_until: null };
  }
  if (typeof given.disabled_until === 'string') {
    const issue = laterInstantIssue(await msAheadOfDatabase(m, given.disabled_until), MAX_DISABLED_DAYS);
    if (issue) throw validationError([{ field: 'disabled_until', message: issue }]);
  }
  return {
    disabled_reason: given.disabled_reason === undefined ? kept.disabled_reason : given.disabled_reason,
    disabled_until: given.disabled_until === undefined ? kept.disabled_until : given.disabled_until,
  };
}

export const toUser = (r: UserRow): UserResponse => ({
  id: r.id,
  tenant_id: r.tenant_id,
  email: r.email,
  name: r.name,
  role: r.role,
  picture: r.picture,
  email_verified: r.email_verified,
  disabled: r.disabled,
  disabled_reason: r.disabled_reason,
  disabled_until: r.disabled_until?.toISOString() ?? null,
  created_at: r.created_at.toISOString(),
  updated_at: r.updated_at.toISOString(),
});

/**
 * Ends every sign-in of the user, in `m`: every account-pages cookie (their epoch moves on,
 * account-session.ts) and every provider session; apps keep their grants. Signing out everywhere
 * (grants.service.ts), a new password and a demotion all do this. The number of provider sessions ended.
 */
export async function endSignIns(m: EntityManager, tenantId: string, userId: string): Promise<number> {
  await m.query(`UPDATE users SET session_epoch = session_epoch + 1 WHERE tenant_id = $1 AND id = $2`, [tenantId, userId]);
  return endProviderSessions(m, userId);
}

@Injectable()
export class UsersService {
  private readonly throttle: SignInThrottle;

  constructor(
    @InjectDataSource() private readonly db: DataSource,
    @Inject(REDIS) private readonly redis: Redis,
    private readonly config: AppConfig,
    private readonly audit: AuditService,
    private readonly keys: KeysService,
    secrets: SecretBox,
  ) {
    this.throttle = new SignInThrottle(
      redis,
      config.REDIS_PREFIX,
      { perAddress: config.SIGN_IN_MAX_FAILURES_PER_ADDRESS, perAccount: config.SIGN_IN_MAX_FAILURES_PER_ACCOUNT },
      () => secrets.derive('sign-in-throttle'),
    );
  }

  /** `user.created`, in the transaction that made the user: who (their email), with which role, whether vouched for; never the password. */
  private recordCreated(m: EntityManager, user: UserRow, actor: AuditActor): Promise<void> {
    const details = {
      actor,
      email: user.email,
      role: user.role,
      email_verified: user.email_verified,
      ...(user.disabled && { disabled: true }),
      ...(user.disabled_until && { disabled_until: user.disabled_until.toISOString() }),
    };
    return this.audit.record({ tenantId: user.tenant_id, action: 'user.created', userId: user.id, details }, m);
  }

  async create(p: Principal, dto: CreateUserDto): Promise<UserResponse> {
    this.assertMayVouch(p, dto);
    const disablement = await disablementOf(this.db.manager, dto.disabled ?? false, dto, { disabled_reason: null, disabled_until: null });
    const hash = await hashPassword(dto.password);
    try {
      const row = await this.db.transaction(async (m) => {
        const [made]: UserRow[] = await m.query(
          `INSERT INTO users (tenant_id, id, email, name, role, picture, email_verified, password_hash, disabled, disabled_reason, disabled_until)
           VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11) RETURNING ${USER_COLUMNS}`,
          [
            p.tenantId, newId(), dto.email, dto.name, dto.role ?? 'member', dto.picture ?? null, dto.email_verified ?? false, hash, dto.disabled ?? false,
            disablement.disabled_reason, disablement.disabled_until,
          ],
        );
        await this.recordCreated(m, made, actorOf(p));
        return made;
      });
      return toUser(row);
    } catch (err) {
      if (isUniqueViolation(err)) {
        throw ApiError.conflict('conflict', 'A user with this email already exists', { field: 'email' });
      }
      throw err;
    }
  }

  /**
   * Sign-up (SVC_SIGNUP_ENABLED): a new tenant whose first user, its admin, is this person.
   * Undefined when the email is taken.
   */
  async signUp(email: string, password: string, name: string): Promise<UserRow | undefined> {
    const hash = await hashPassword(password);
    try {
      return await this.db.transaction(async (m) => {
        const { id: tenantId } = await insertTenant(m, name);
        const [row]: UserRow[] = await m.query(
          `INSERT INTO users (tenant_id, id, email, name, role, password_hash) VALUES ($1, $2, $3, $4, 'admin', $5) RETURNING ${USER_COLUMNS}`,
          [tenantId, newId(), email.trim(), name, hash],
        );
        // The person signing up made both, as the user they became.
        const actor: AuditActor = { kind: 'user', id: row.id };
        await this.audit.record({ tenantId, action: 'tenant.created', userId: row.id, details: { actor, tenant_id: tenantId, name } }, m);
        await this.recordCreated(m, row, actor);
        return row;
      });
    } catch (err) {
      if (isUniqueViolation(err)) return undefined;
      throw err;
    }
  }

  async list(p: Principal, q: ListUsersQuery): Promise<UserList> {
    const limit = q.limit ?? 50;
    const after = decodeCursor(q.cursor, 'users');
    const rows: UserRow[] = await this.db.query(
      `SELECT ${USER_COLUMNS} FROM users WHERE tenant_id = $1 AND ($2::timestamptz IS NULL OR (created_at, id) < ($2, $3::uuid))
          AND ($5::text IS NULL OR lower(email) = lower($5)) AND ($6::boolean IS NULL OR ${DISABLED_NOW} = $6)
        ORDER BY created_at DESC, id DESC LIMIT $4`,
      [p.tenantId, after?.createdAt ?? null, after?.id ?? null, limit + 1, q.email ?? null, q.disabled ?? null],
    );
    const { page, next_cursor } = pageOf(rows, limit, (r) => r.created_at, 'users');
    return { users: page.map(toUser), next_cursor };
  }

  async get(p: Principal, id: string): Promise<UserResponse> {
    const [row]: UserRow[] = await this.db.query(`SELECT ${USER_COLUMNS} FROM users WHERE tenant_id = $1 AND id = $2`, [p.tenantId, id]);
    if (!row) throw ApiError.notFound('not_found', 'No such user');
    return toUser(row);
  }

  /**
   * `email_verified` is the OIDC claim relying parties may link accounts by, and every tenant
   * shares one issuer: only the root tenant's admins (the operator) vouch for addresses, unless
   * the operator trusts every tenant's (TENANT_ADMINS_VERIFY_EMAILS).
   */
  private assertMayVouch(p: Principal, dto: { email_verified?: boolean }): void {
    if (dto.email_verified === undefined || p.isRootTenant || this.config.TENANT_ADMINS_VERIFY_EMAILS) return;
    throw ApiError.forbidden('Only the root tenant\'s admins may set email_verified here (TENANT_ADMINS_VERIFY_EMAILS is off)');
  }

  /**
   * Changes a user. A new password or a demotion ends the user's sign-ins, as signing out
   * everywhere does (the account pages' cookies and the provider's sessions): whoever knew the old
   * password, or signed in as an admin, is out. A demotion also revokes the API keys the user made
   * on the account pages (`revokeCreatedBy`, 409 should that leave the tenant no admin key), and
   * any role change holds for the user's OAuth tokens from the next request (`withinUserRole`,
   * applied when a token is resolved, under the generation bumped here). Their grants stay.
   *
   * Disabling a user ends all they had, as deleting them does (`endAccess`): sign-ins, grants with
   * their tokens, the keys they made on the account pages; enabling them again gives none of it
   * back, only sign-in. A key the user made cannot disable or demote them (409: its caller would lose
   * it, `assertNotCallersMaker`).
   */
  async update(p: Principal, id: string, dto: UpdateUserDto): Promise<UserResponse> {
    this.assertMayVouch(p, dto);
    const hash = dto.password !== undefined ? await hashPassword(dto.password) : undefined;
    const { row, tokensChanged, keysRevoked } = await this.db.transaction(async (m) => {
      const [before]: UserRow[] = await m.query(`SELECT ${USER_COLUMNS} FROM users WHERE tenant_id = $1 AND id = $2 FOR UPDATE`, [p.tenantId, id]);
      if (!before) throw ApiError.notFound('not_found', 'No such user');
      const roleChanged = dto.role !== undefined && dto.role !== before.role;
      const demoted = roleChanged && dto.role === 'member';
      // `before` as the user is now: a disablement whose end has passed is none, so disabling them again ends what they have since.
      const disabled = dto.disabled === true && !before.disabled;
      const disabledAfter = dto.disabled ?? before.disabled;
      const disablement = await disablementOf(m, disabledAfter, dto, before);
      // Disabling ends the keys the user made, and so does a demotion: either would end the calling key if it is one of them.
      if (disabled || demoted) await this.assertNotCallersMaker(m, p, id, disabled ? 'disabled' : 'role');
      const changed = [
        ...changedFields(Object.fromEntries(AUDITED_FIELDS.filter((f) => dto[f] !== undefined).map((f) => [f, [before[f], dto[f]] as const]))),
        ...(hash !== undefined ? ['password'] : []),
      ];
      // The disablement is written as the user has it now: one whose end has passed is cleared with this write.
      const [[row]]: [UserRow[], number] = await m.query(
        `UPDATE users SET name = COALESCE($3, name), role = COALESCE($4, role), picture = CASE WHEN $5 THEN $6 ELSE picture END,
                password_hash = COALESCE($7, password_hash), email_verified = COALESCE($9, email_verified),
                disabled = $10, disabled_reason = $11, disabled_until = $12,
                updated_at = CASE WHEN $8 THEN date_trunc('milliseconds', now()) ELSE updated_at END
          WHERE tenant_id = $1 AND id = $2 RETURNING ${USER_COLUMNS}`,
        [
          p.tenantId, id, dto.name ?? null, dto.role ?? null, dto.picture !== undefined, dto.picture ?? null, hash ?? null, changed.length > 0,
          dto.email_verified ?? null, disabledAfter, disablement.disabled_reason, disablement.disabled_until,
        ],
      );
      // Before the audit row, which counts what it ended.
      const ended = disabled ? await this.endAccess(m, p, id, 'user_disabled') : undefined;
      if (changed.length) {
        const details = {
          actor: actorOf(p),
          changed,
          ...(roleChanged && { role: { from: before.role, to: row.role } }),
          ...(ended && { grants_revoked: ended.grants, keys_revoked: ended.keys }),
        };
        await this.audit.record({ tenantId: p.tenantId, action: 'user.updated', userId: id, details }, m);
      }
      if (!disabled && (hash !== undefined || demoted)) await endSignIns(m, p.tenantId, id);
      const keysRevoked = ended?.keys ?? (demoted ? await this.keys.revokeCreatedBy(m, p.tenantId, id, actorOf(p)) : 0);
      return { row, tokensChanged: roleChanged || disabled, keysRevoked };
    });
    // A role change, or the end of the grants, holds for the user's tokens from the next request, on every instance.
    if (tokensChanged) await bumpGeneration(this.redis, `${this.config.REDIS_PREFIX}${OAUTH_GENERATION}`);
    if (keysRevoked) await this.keys.keysChanged();
    return toUser(row);
  }

  /**
   * Deletes the user with their OAuth grants, tokens and sessions, and revokes the API keys they
   * made on the account pages (409, deleting nothing, should that leave the tenant no admin key,
   * or should the calling key be one of them): the tokens and keys stop working at once, and each
   * grant's end is audited (`auth.grant.revoked`, by `user_deleted`).
   */
  async remove(p: Principal, id: string): Promise<UserResponse> {
    let keysRevoked = 0;
    const rows = await this.db.transaction(async (m) => {
      const [deleted]: [UserRow[], number] = await m.query(`DELETE FROM users WHERE tenant_id = $1 AND id = $2 RETURNING ${USER_COLUMNS}`, [p.tenantId, id]);
      if (deleted[0]) {
        // After the delete found the user, so that an unknown one is 404; refused, it rolls back.
        await this.assertNotCallersMaker(m, p, id, 'id');
        const ended = await this.endAccess(m, p, id, 'user_deleted');
        keysRevoked = ended.keys;
        const details = { actor: actorOf(p), email: deleted[0].email, grants_revoked: ended.grants, keys_revoked: keysRevoked };
        await this.audit.record({ tenantId: p.tenantId, action: 'user.deleted', userId: id, details }, m);
      }
      return deleted;
    });
    if (!rows[0]) throw ApiError.notFound('not_found', 'No such user');
    await bumpGeneration(this.redis, `${this.config.REDIS_PREFIX}${OAUTH_GENERATION}`);
    if (keysRevoked) await this.keys.keysChanged();
    return toUser(rows[0]);
  }

  /**
   * Ends everything a user being deleted or disabled had, in `m`: the API keys they made on the
   * account pages (409, ending nothing, should that leave the tenant no admin key), their
   * account-page cookies (`endSignIns`), and their OAuth grants with every token and provider
   * session (`endAccounts`), each grant's end audited `auth.grant.revoked` `by`. How many grants
   * and keys. Bump the OAuth generation and call `keysChanged` once committed.
   */
  private async endAccess(m: EntityManager, p: Principal, id: string, by: 'user_deleted' | 'user_disabled'): Promise<{ grants: number; keys: number }> {
    const keys = await this.keys.revokeCreatedBy(m, p.tenantId, id, actorOf(p));
    await endSignIns(m, p.tenantId, id);
    const grants = await endAccounts(m, [id]);
    for (const grant of grants) {
      await this.audit.record({ tenantId: p.tenantId, action: 'auth.grant.revoked', clientId: grant.client_id, userId: id, grantId: grant.id, details: { by } }, m);
    }
    return { grants: grants.length, keys };
  }

  /**
   * The one "cannot do this to yourself": API keys are not users, but a key an admin user made on
   * the account pages is theirs, and disabling, demoting or deleting them revokes it
   * (`revokeCreatedBy`) under its caller, who could then undo nothing. Another admin's credential
   * may. 409 `conflict` naming what asked for it: `field` (`disabled`, `role`, or the path's `id`
   * for a deletion).
   */
  private async assertNotCallersMaker(m: EntityManager, p: Principal, userId: string, field: keyof typeof SELF_ENDING): Promise<void> {
    if (p.kind !== 'api_key') return;
    const own = await m.query(`SELECT 1 FROM api_keys WHERE tenant_id = $1 AND id = $2 AND created_by_user_id = $3`, [p.tenantId, p.credentialId, userId]);
    if (own.length) {
      throw ApiError.conflict('conflict', `This key was made by this user, who cannot ${SELF_ENDING[field]} themselves: use another admin's key`, { field });
    }
  }

  /**
   * Deletes every user of a tenant being deleted, with their grants, tokens and sessions, inside
   * the caller's transaction, unaudited (the tenant's log goes with it): how many. Bump the
   * OAuth token cache's generation once committed (ClientsService.tokensChanged).
   */
  async removeAll(m: EntityManager, tenantId: string): Promise<number> {
    const deleted: Array<{ id: string }> = (await m.query(`DELETE FROM users WHERE tenant_id = $1 RETURNING id::text`, [tenantId]))[0];
    await endAccounts(m, deleted.map((u) => u.id));
    return deleted.length;
  }

  /**
   * Sign-in, for every form that checks a password: the user whose email and password match, in
   * about the same time either way; refused without a check while the email has had too many
   * failures from `address` (the client's, `req.ip`), or from everywhere (sign-in-throttle.ts).
   * A disabled user is refused as an unknown email is (a failure, the same words, the same work):
   * the answer does not tell whoever has the password that it was right.
   */
  async authenticate(email: string, password: string, address: string): Promise<SignIn> {
    // No account has one this long: refused before any work (a lookup, a throttle count) for it.
    if (email.trim().length > MAX_EMAIL_LENGTH) return { refusal: WRONG_PASSWORD };
    // Counted under the email as the look-up below matches it (PostgreSQL's lower, not
    // JavaScript's: they differ on letters such as U+0130), so no spelling of one account gets a
    // count of its own.
    const [{ matched }]: Array<{ matched: string }> = await this.db.query(`SELECT lower($1) AS matched`, [email.trim()]);
    const wait = await this.throttle.attempt(matched, address);
    if (wait !== undefined) {
      return { refusal: `Too many failed sign-ins for this account; try again in ${wait} minute${wait === 1 ? '' : 's'}.` };
    }
    const [row]: Array<UserRow & { password_hash: string }> = await this.db.query(
      `SELECT ${USER_COLUMNS}, password_hash FROM users WHERE lower(email) = lower($1) AND ${USABLE_USER}`,
      [email.trim()],
    );
    if (!row) return verifyAgainstNothing(password).then(() => ({ refusal: WRONG_PASSWORD }));
    const { password_hash, ...user } = row;
    if (!(await verifyPassword(password, password_hash))) return { refusal: WRONG_PASSWORD };
    await this.throttle.succeeded(matched, address);
    return { user };
  }

  /**
   * A key the user makes on the account pages, recorded as theirs: undefined when they are not
   * (or no longer) an enabled admin of the tenant, the one rule for who may. Their row is share-locked
   * until the key is in, so a deletion or demotion at the same moment either comes first (no key)
   * or after, and then revokes it (`KeysService.revokeCreatedBy`); so does disabling them.
   */
  async createKey(tenantId: string, userId: string, dto: CreateKeyDto): Promise<ApiKeyResponse | undefined> {
    return this.db.transaction(async (m) => {
      const admin = await m.query(`SELECT 1 FROM users WHERE tenant_id = $1 AND id = $2 AND role = 'admin' AND ${USABLE_USER} FOR SHARE`, [tenantId, userId]);
      return admin.length ? this.keys.insert(m, tenantId, dto, userId) : undefined;
    });
  }

  /** The OIDC `sub` → the user (any tenant: the id is unique), while they may act (`USABLE_USER`). */
  async byId(id: string): Promise<UserRow | undefined> {
    const [row]: UserRow[] = await this.db.query(`SELECT ${USER_COLUMNS} FROM users WHERE id = $1 AND ${USABLE_USER}`, [id]);
    return row;
  }
}
