import { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Device-flow polling (src/oidc/device-polling.ts): when each device code was last polled and at
 * what interval, so that polling faster than the interval is `slow_down` and raises it (RFC 8628).
 */
export class OauthDevicePolls1732300001500 implements MigrationInterface {
  name = 'OauthDevicePolls1732300001500';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`
      CREATE TABLE oauth_device_polls (
        device_code text PRIMARY KEY,
        interval_s integer NOT NULL,
        last_poll timestamptz NOT NULL,
        created_at timestamptz NOT NULL DEFAULT now()
      )`);
    await q.query(`CREATE INDEX oauth_device_polls_created ON oauth_device_polls (created_at)`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`DROP TABLE oauth_device_polls`);
  }
}
