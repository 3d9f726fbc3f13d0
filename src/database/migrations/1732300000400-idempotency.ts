import { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Idempotency keys (src/idempotency). One row per (tenant, credential, key): the claim of a
 * request while it runs, then its sealed response until expires_at. The key itself is kept
 * only as a SHA-256 (key_hash), and response_body is sealed under a key derived from it
 * (response-seal.ts), so the table alone reveals no response. Requests without a caller
 * (bootstrap) use the nil tenant id and credential 'bootstrap'; hence no foreign key.
 */
export class Idempotency1732300000400 implements MigrationInterface {
  name = 'Idempotency1732300000400';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`
      CREATE TABLE idempotency_keys (
        tenant_id uuid NOT NULL,
        credential_id text NOT NULL,
        key_hash text NOT NULL,
        fingerprint text NOT NULL,
        state text NOT NULL CHECK (state IN ('in_progress', 'completed')),
        response_status integer,
        response_body bytea,
        created_at timestamptz NOT NULL DEFAULT now(),
        expires_at timestamptz NOT NULL,
        PRIMARY KEY (tenant_id, credential_id, key_hash),
        CHECK (state = 'in_progress' OR (response_status IS NOT NULL AND response_body IS NOT NULL))
      )`);
    await q.query(`CREATE INDEX idempotency_keys_expires ON idempotency_keys (expires_at)`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`DROP TABLE idempotency_keys`);
  }
}
