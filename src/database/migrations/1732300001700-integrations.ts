import { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Integration manifests (src/integrations): service-wide, registered by the root tenant's
 * admins; a new version of a name is a new record, a repeated (name, version) is refused.
 */
export class Integrations1732300001700 implements MigrationInterface {
  name = 'Integrations1732300001700';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`
      CREATE TABLE integrations (
        id uuid PRIMARY KEY,
        manifest_name text NOT NULL,
        manifest_version text NOT NULL,
        publisher text NOT NULL,
        direction text NOT NULL,
        runtime_compatibility text[] NOT NULL,
        manifest jsonb NOT NULL,
        summary text NOT NULL,
        registered_by text NOT NULL,
        registered_at timestamptz NOT NULL DEFAULT date_trunc('milliseconds', now()),
        CONSTRAINT integrations_name_version UNIQUE (manifest_name, manifest_version)
      )`);
    await q.query(`CREATE INDEX integrations_listing ON integrations (registered_at DESC, id DESC)`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`DROP TABLE integrations`);
  }
}
