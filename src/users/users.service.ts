/**
 * Owns users: the people who sign in to the OAuth provider and consent for apps. Admins of a
 * tenant create, list and delete its users; the provider looks them up by email (sign-in, with
 * the password check) and by id (the OIDC `sub`).
 */
import { Inject, Injectable } from '@nestjs/common';
import Redis from 'ioredis';
import { InjectDataSource } from '@nestjs/typeorm';
import { DataSource } from 'typeorm';
import { AuditService } from '../audit/audit.service';
import type { Principal } from '../auth/principal';
import { ApiError } from '../common/api-error';
import { newId } from '../common/ids';
import { decodeCursor, pageOf } from '../common/pagination';
import { AppConfig } from '../config/app-config';
import { bumpGeneration, OAUTH_GENERATION } from '../keys/key-cache';
import { REDIS } from '../redis/redis.module';
import { hashPassword, verifyAgainstNothing, verifyPassword } from './password';
import { CreateUserDto, ListUsersQuery, UserList, UserResponse, UserRole } from './users.dto';

export interface UserRow {
  tenant_id: string;
  id: string;
  email: string;
  name: string;
  role: UserRole;
  picture: string | null;
  created_at: Date;
  /** How many times the user signed out everywhere (a bigint, as text): account cookies of an earlier epoch are void (account-session.ts). */
  session_epoch: string;
}

const USER_COLUMNS = 'tenant_id, id, email, name, role, picture, created_at, session_epoch';
const UNIQUE_VIOLATION = '23505';

export const toUser = (r: UserRow): UserResponse => ({
  id: r.id,
  tenant_id: r.tenant_id,
  email: r.email,
  name: r.name,
  role: r.role,
  picture: r.picture,
  created_at: r.created_at.toISOString(),
});

@Injectable()
export class UsersService {
  constructor(
    @InjectDataSource() private readonly db: DataSource,
    @Inject(REDIS) private readonly redis: Redis,
    private readonly config: AppConfig,
    private readonly audit: AuditService,
  ) {}

  async create(p: Principal, dto: CreateUserDto): Promise<UserResponse> {
    const hash = await hashPassword(dto.password);
    try {
      const [row]: UserRow[] = await this.db.query(
        `INSERT INTO users (tenant_id, id, email, name, role, picture, password_hash) VALUES ($1, $2, $3, $4, $5, $6, $7) RETURNING ${USER_COLUMNS}`,
        [p.tenantId, newId(), dto.email, dto.name, dto.role ?? 'member', dto.picture ?? null, hash],
      );
      return toUser(row);
    } catch (err) {
      if ((err as { code?: string }).code === UNIQUE_VIOLATION) {
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
        const tenantId = newId();
        await m.query(`INSERT INTO tenants (id, name, is_root, created_at) VALUES ($1, $2, false, now())`, [tenantId, name]);
        const [row]: UserRow[] = await m.query(
          `INSERT INTO users (tenant_id, id, email, name, role, password_hash) VALUES ($1, $2, $3, $4, 'admin', $5) RETURNING ${USER_COLUMNS}`,
          [tenantId, newId(), email.trim(), name, hash],
        );
        return row;
      });
    } catch (err) {
      if ((err as { code?: string }).code === UNIQUE_VIOLATION) return undefined;
      throw err;
    }
  }

  async list(p: Principal, q: ListUsersQuery): Promise<UserList> {
    const limit = q.limit ?? 50;
    const after = decodeCursor(q.cursor);
    const rows: UserRow[] = await this.db.query(
      `SELECT ${USER_COLUMNS} FROM users WHERE tenant_id = $1 AND ($2::timestamptz IS NULL OR (created_at, id) < ($2, $3::uuid))
        ORDER BY created_at DESC, id DESC LIMIT $4`,
      [p.tenantId, after?.createdAt ?? null, after?.id ?? null, limit + 1],
    );
    const { page, next_cursor } = pageOf(rows, limit, (r) => r.created_at);
    return { users: page.map(toUser), next_cursor };
  }

  async get(p: Principal, id: string): Promise<UserResponse> {
    const [row]: UserRow[] = await this.db.query(`SELECT ${USER_COLUMNS} FROM users WHERE tenant_id = $1 AND id = $2`, [p.tenantId, id]);
    if (!row) throw ApiError.notFound('not_found', 'No such user');
    return toUser(row);
  }

  /**
   * Deletes the user with their OAuth grants, tokens and sessions: the tokens stop working at
   * once, and each grant's end is audited (`auth.grant.revoked`, by `user_deleted`).
   */
  async remove(p: Principal, id: string): Promise<UserResponse> {
    const rows = await this.db.transaction(async (m) => {
      const [deleted]: [UserRow[], number] = await m.query(`DELETE FROM users WHERE tenant_id = $1 AND id = $2 RETURNING ${USER_COLUMNS}`, [p.tenantId, id]);
      if (deleted[0]) {
        const grants: Array<{ id: string; client_id: string }> = await m.query(
          `SELECT id, payload->>'clientId' AS client_id FROM oidc_models WHERE model = 'Grant' AND payload->>'accountId' = $1`,
          [id],
        );
        // The grants' tokens, then every row of the account: each statement on its index.
        await m.query(`DELETE FROM oidc_models WHERE grant_id = ANY($1::text[])`, [grants.map((g) => g.id)]);
        await m.query(`DELETE FROM oidc_models WHERE payload->>'accountId' = $1`, [id]);
        for (const grant of grants) {
          await this.audit.record(
            { tenantId: p.tenantId, action: 'auth.grant.revoked', clientId: grant.client_id, userId: id, grantId: grant.id, details: { by: 'user_deleted' } },
            m,
          );
        }
      }
      return deleted;
    });
    if (!rows[0]) throw ApiError.notFound('not_found', 'No such user');
    await bumpGeneration(this.redis, `${this.config.REDIS_PREFIX}${OAUTH_GENERATION}`);
    return toUser(rows[0]);
  }

  /** Sign-in: the user whose email and password match, in about the same time either way. */
  async authenticate(email: string, password: string): Promise<UserRow | undefined> {
    const [row]: Array<UserRow & { password_hash: string }> = await this.db.query(
      `SELECT ${USER_COLUMNS}, password_hash FROM users WHERE lower(email) = lower($1)`,
      [email.trim()],
    );
    if (!row) return verifyAgainstNothing(password).then(() => undefined);
    const { password_hash, ...user } = row;
    return (await verifyPassword(password, password_hash)) ? user : undefined;
  }

  /** The OIDC `sub` → the user (any tenant: the id is unique). */
  async byId(id: string): Promise<UserRow | undefined> {
    const [row]: UserRow[] = await this.db.query(`SELECT ${USER_COLUMNS} FROM users WHERE id = $1`, [id]);
    return row;
  }
}
