/**
 * The idempotency_keys table: claims, completions, lookups and expiry. Postgres is the source
 * of truth, so a key behaves the same whichever instance a retry reaches. A row whose
 * expires_at has passed counts as absent everywhere and is replaced by the next claim.
 */
import { Injectable } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import { DataSource } from 'typeorm';
import { AppConfig } from '../config/app-config';
import type { KeyOwner } from './idempotency-key';

/**
 * A claim's lease runs until `lease_until`, which its request renews while it runs
 * (IDEMPOTENCY_LEASE_SECONDS from each renewal). Once it lapses, a retry may take an
 * `in_progress` claim over: the instance running the first request died, or never learned
 * that its claim was taken (the reply was lost). A claim whose work committed is `applied`,
 * and never taken over. A row without a lease (claimed by an instance not yet upgraded) keeps
 * the rule those instances follow: 5 minutes from its claim.
 */
const LEASE_END = `coalesce(k.lease_until, k.created_at + interval '300 seconds')`;

export interface StoredKey {
  fingerprint: string;
  /** `applied`: the work committed (claim-applied.ts), its response not kept (yet). */
  state: 'in_progress' | 'applied' | 'completed';
  responseStatus: number | null;
  responseBody: Buffer | null;
  /** The kept response's Location header, if it had one. */
  responseLocation: string | null;
  /** Its lease lapsed: the request that claimed it is gone. */
  abandoned: boolean;
}

/** Identifies one claim, so a claim that was taken over is never completed or released by its first holder. */
export type Claim = string;

/**
 * Marks a claim `applied`, through `query`: the connection of the transaction that commits its
 * request's work (claim-applied.ts), so that both commit together. False when the claim is no
 * longer this request's (a retry took it over after its lease lapsed): that work must not commit.
 */
export async function markApplied(query: (sql: string, params: unknown[]) => Promise<unknown>, owner: KeyOwner, keyHash: string, claim: Claim): Promise<boolean> {
  // TypeORM answers an UPDATE with [rows, rowCount].
  const [, count] = (await query(
    `UPDATE idempotency_keys SET state = 'applied'
      WHERE tenant_id = $1 AND credential_id = $2 AND key_hash = $3 AND state = 'in_progress' AND created_at = $4::timestamptz`,
    [owner.tenantId, owner.credentialId, keyHash, claim],
  )) as [unknown, number];
  return count > 0;
}

@Injectable()
export class IdempotencyStore {
  constructor(
    @InjectDataSource() private readonly db: DataSource,
    private readonly config: AppConfig,
  ) {}

  /**
   * Claims the key for a request with this fingerprint: inserts the row, or replaces one that
   * expired or whose same-fingerprint claim's lease lapsed. Undefined when a live row exists.
   */
  async claim(owner: KeyOwner, keyHash: string, fingerprint: string): Promise<Claim | undefined> {
    const rows: Array<{ claim: string }> = await this.db.query(
      `INSERT INTO idempotency_keys AS k (tenant_id, credential_id, key_hash, fingerprint, state, created_at, expires_at, lease_until)
       VALUES ($1, $2, $3, $4, 'in_progress', clock_timestamp(), clock_timestamp() + make_interval(hours => $5), clock_timestamp() + make_interval(secs => $6))
       ON CONFLICT (tenant_id, credential_id, key_hash) DO UPDATE
          SET fingerprint = EXCLUDED.fingerprint, state = 'in_progress', response_status = NULL, response_body = NULL,
              created_at = EXCLUDED.created_at, expires_at = EXCLUDED.expires_at, lease_until = EXCLUDED.lease_until
        WHERE k.expires_at <= clock_timestamp()
           OR (k.state = 'in_progress' AND k.fingerprint = EXCLUDED.fingerprint AND ${LEASE_END} <= clock_timestamp())
       RETURNING k.created_at::text AS claim`,
      [owner.tenantId, owner.credentialId, keyHash, fingerprint, this.config.IDEMPOTENCY_TTL_HOURS, this.config.IDEMPOTENCY_LEASE_SECONDS],
    );
    return rows[0]?.claim;
  }

  /** Extends the claim's lease while its request runs; nothing once the claim is no longer its own. */
  async renew(owner: KeyOwner, keyHash: string, claim: Claim): Promise<void> {
    await this.db.query(
      `UPDATE idempotency_keys SET lease_until = clock_timestamp() + make_interval(secs => $5)
        WHERE tenant_id = $1 AND credential_id = $2 AND key_hash = $3 AND state IN ('in_progress', 'applied') AND created_at = $4::timestamptz`,
      [owner.tenantId, owner.credentialId, keyHash, claim, this.config.IDEMPOTENCY_LEASE_SECONDS],
    );
  }

  /** The live (unexpired) row of a key. */
  async find(owner: KeyOwner, keyHash: string): Promise<StoredKey | undefined> {
    const rows: Array<{
      fingerprint: string;
      state: StoredKey['state'];
      response_status: number | null;
      response_body: Buffer | null;
      response_location: string | null;
      abandoned: boolean;
    }> = await this.db.query(
        `SELECT fingerprint, state, response_status, response_body, response_location, ${LEASE_END} <= clock_timestamp() AS abandoned
           FROM idempotency_keys AS k
          WHERE tenant_id = $1 AND credential_id = $2 AND key_hash = $3 AND expires_at > clock_timestamp()`,
        [owner.tenantId, owner.credentialId, keyHash],
      );
    const row = rows[0];
    return (
      row && {
        fingerprint: row.fingerprint,
        state: row.state,
        responseStatus: row.response_status,
        responseBody: row.response_body,
        responseLocation: row.response_location,
        abandoned: row.abandoned,
      }
    );
  }

  /** Keeps the response of a claimed request. */
  async complete(owner: KeyOwner, keyHash: string, claim: Claim, status: number, sealedBody: Buffer, location: string | null): Promise<void> {
    await this.db.query(
      `UPDATE idempotency_keys SET state = 'completed', response_status = $5, response_body = $6, response_location = $7
        WHERE tenant_id = $1 AND credential_id = $2 AND key_hash = $3 AND state IN ('in_progress', 'applied') AND created_at = $4::timestamptz`,
      [owner.tenantId, owner.credentialId, keyHash, claim, status, sealedBody, location],
    );
  }

  /**
   * Gives a claim up (the request failed in a way worth retrying), so the next retry runs again;
   * not once its work was applied, which a retry must not do again.
   */
  async release(owner: KeyOwner, keyHash: string, claim: Claim): Promise<void> {
    await this.db.query(
      `DELETE FROM idempotency_keys
        WHERE tenant_id = $1 AND credential_id = $2 AND key_hash = $3 AND state = 'in_progress' AND created_at = $4::timestamptz`,
      [owner.tenantId, owner.credentialId, keyHash, claim],
    );
  }

  /** Deletes up to `limit` expired rows; returns how many went. */
  async purgeExpired(limit: number): Promise<number> {
    // TypeORM answers a DELETE with [rows, rowCount].
    const [, count]: [unknown[], number] = await this.db.query(
      `DELETE FROM idempotency_keys WHERE ctid IN (
         SELECT ctid FROM idempotency_keys WHERE expires_at <= clock_timestamp() LIMIT $1)`,
      [limit],
    );
    return count;
  }
}
