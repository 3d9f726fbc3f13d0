import { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Tenant deletion (`DELETE /tenants/{id}`): `deleted_at` ends the tenant at once (its keys stop
 * resolving, it leaves the listings), and the purge (tenant-purge.ts) then deletes its rows in
 * batches, sweeping again until no request that began before the deletion can still be writing,
 * when it sets `purged_at`. The row itself stays, a tombstone the root tenant's audit log and
 * any late write's foreign key can still name.
 */
export class TenantDeletion1732300005100 implements MigrationInterface {
  name = 'TenantDeletion1732300005100';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`ALTER TABLE tenants ADD COLUMN deleted_at timestamptz, ADD COLUMN purged_at timestamptz`);
    await q.query(`CREATE INDEX tenants_being_purged ON tenants (deleted_at) WHERE deleted_at IS NOT NULL AND purged_at IS NULL`);
  }

  async down(q: QueryRunner): Promise<void> {
    // Without its mark a deleted tenant whose rows the purge has not removed yet is whole again:
    // its keys work and its 202 is undone, for good. The purge must finish first; the rows it
    // left (tombstones) go, or an earlier release would list them as empty tenants.
    // A deletion committing between the count and the ALTER would lose its mark: held off from here.
    await q.query(`LOCK TABLE tenants IN SHARE ROW EXCLUSIVE MODE`);
    const [{ purging }]: Array<{ purging: number }> = await q.query(`SELECT count(*)::int AS purging FROM tenants WHERE deleted_at IS NOT NULL AND purged_at IS NULL`);
    if (purging > 0) {
      throw new Error(`${purging} deleted tenant(s) are not purged yet, and reverting would bring them back: let the service run until they are (a pass a minute), then revert again`);
    }
    await q.query(`DELETE FROM tenants WHERE purged_at IS NOT NULL`);
    await q.query(`DROP INDEX tenants_being_purged`);
    await q.query(`ALTER TABLE tenants DROP COLUMN deleted_at, DROP COLUMN purged_at`);
  }
}
