import { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * The OAuth/OIDC provider's storage (src/oidc).
 * - oidc_models: every oidc-provider model (clients, grants, sessions, interactions, codes,
 *   access and refresh tokens, device codes…) as `payload`, keyed by (model, id), with the
 *   columns its adapter looks things up by. Rows outlive their expiry for a while (the janitor
 *   removes them later), so an expired token can be told from an unknown one.
 * - oidc_signing_keys: the RS256 keys that sign id_tokens, sealed with SVC_ENCRYPTION_KEY; the
 *   newest unretired key signs, every unretired key is published in the JWKS.
 */
export class Oidc1732300001400 implements MigrationInterface {
  name = 'Oidc1732300001400';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`
      CREATE TABLE oidc_models (
        model text NOT NULL,
        id text NOT NULL,
        payload jsonb NOT NULL,
        grant_id text,
        user_code text,
        uid text,
        expires_at timestamptz,
        consumed_at timestamptz,
        PRIMARY KEY (model, id)
      )`);
    await q.query(`CREATE INDEX oidc_models_grant ON oidc_models (grant_id) WHERE grant_id IS NOT NULL`);
    await q.query(`CREATE UNIQUE INDEX oidc_models_user_code ON oidc_models (model, user_code) WHERE user_code IS NOT NULL`);
    await q.query(`CREATE UNIQUE INDEX oidc_models_uid ON oidc_models (model, uid) WHERE uid IS NOT NULL`);
    await q.query(`CREATE INDEX oidc_models_expires ON oidc_models (expires_at) WHERE expires_at IS NOT NULL`);
    await q.query(`
      CREATE TABLE oidc_signing_keys (
        kid text PRIMARY KEY,
        jwk_sealed text NOT NULL,
        created_at timestamptz NOT NULL DEFAULT now(),
        retired_at timestamptz
      )`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`DROP TABLE oidc_signing_keys`);
    await q.query(`DROP TABLE oidc_models`);
  }
}
