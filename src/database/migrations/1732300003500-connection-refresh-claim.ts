import { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * A connection's refresh claim (src/integrations/connections.service.ts): the refresh that may
 * send the stored refresh token, until when. A refresh takes it in one statement and holds no
 * database connection while the upstream answers; the tokens it brings back are stored only
 * while the claim is still its own.
 */
export class ConnectionRefreshClaim1732300003500 implements MigrationInterface {
  name = 'ConnectionRefreshClaim1732300003500';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`ALTER TABLE connections ADD COLUMN refresh_claim uuid, ADD COLUMN refresh_claimed_until timestamptz`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`ALTER TABLE connections DROP COLUMN refresh_claim, DROP COLUMN refresh_claimed_until`);
  }
}
