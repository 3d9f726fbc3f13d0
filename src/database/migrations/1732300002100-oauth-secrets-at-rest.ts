import { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * OAuth secrets no longer usable by whoever reads the database:
 * - oidc_models rows of tokens and codes are keyed by the SHA-256 (hex) of their value, and their
 *   payload drops the `jti` that repeated it (src/oidc/oidc-adapter.ts, `storedTokenId`). Rows
 *   written before are converted in place; a row still carrying `jti` is one not yet converted,
 *   which makes `up` safe to run again. A device code still waiting for the user's decision is
 *   deleted instead: deciding it needs its value, which the adapter now keeps sealed and SQL
 *   cannot seal; it lives ten minutes at most, and the device starts over.
 * - users.session_epoch: how many times the user signed out everywhere; an account-pages cookie
 *   stamped with an earlier epoch is void (src/oidc/account-session.ts).
 */
export class OauthSecretsAtRest1732300002100 implements MigrationInterface {
  name = 'OauthSecretsAtRest1732300002100';

  /** As in oidc-adapter.ts when this was written (a migration must not change with the code). */
  private readonly tokenModels = [
    'AccessToken',
    'ClientCredentials',
    'RefreshToken',
    'AuthorizationCode',
    'DeviceCode',
    'RegistrationAccessToken',
    'InitialAccessToken',
    'BackchannelAuthenticationRequest',
    'PushedAuthorizationRequest',
  ];

  async up(q: QueryRunner): Promise<void> {
    await q.query(
      `DELETE FROM oidc_models WHERE model = 'DeviceCode' AND payload ? 'jti' AND consumed_at IS NULL AND NOT payload ?| array['accountId', 'error']`,
    );
    await q.query(
      `UPDATE oidc_models SET id = encode(sha256(convert_to(id, 'UTF8')), 'hex'), payload = payload - 'jti' WHERE model = ANY($1) AND payload ? 'jti'`,
      [this.tokenModels],
    );
    await q.query(`ALTER TABLE users ADD COLUMN IF NOT EXISTS session_epoch bigint NOT NULL DEFAULT 0`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`ALTER TABLE users DROP COLUMN session_epoch`);
    // The values cannot be recovered from their digests, and the code before this migration looks
    // tokens up by value: every token and code is deleted, and their apps authorize again.
    await q.query(`DELETE FROM oidc_models WHERE model = ANY($1)`, [this.tokenModels]);
  }
}
