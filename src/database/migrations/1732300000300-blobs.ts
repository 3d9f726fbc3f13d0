import { MigrationInterface, QueryRunner } from 'typeorm';

/** Blob metadata (every storage backend) and blob content for BLOB_STORAGE=postgres. */
export class Blobs1732300000300 implements MigrationInterface {
  name = 'Blobs1732300000300';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`
      CREATE TABLE blobs (
        tenant_id uuid NOT NULL REFERENCES tenants(id) ON DELETE CASCADE,
        hash text NOT NULL CHECK (hash ~ '^[0-9a-f]{64}$'),
        size bigint NOT NULL CHECK (size >= 0),
        content_type text NOT NULL,
        created_at timestamptz NOT NULL DEFAULT now(),
        PRIMARY KEY (tenant_id, hash)
      )`);
    // Content rows are written before the metadata row (so no foreign key to blobs); chunk 0
    // always exists, empty for an empty blob.
    await q.query(`
      CREATE TABLE blob_chunks (
        tenant_id uuid NOT NULL REFERENCES tenants(id) ON DELETE CASCADE,
        hash text NOT NULL CHECK (hash ~ '^[0-9a-f]{64}$'),
        seq integer NOT NULL CHECK (seq >= 0),
        data bytea NOT NULL,
        PRIMARY KEY (tenant_id, hash, seq)
      )`);
    // Out of line and uncompressed: uploads are mostly compressed formats already, and
    // pglz on each 1 MiB chunk would cost CPU for nothing.
    await q.query(`ALTER TABLE blob_chunks ALTER COLUMN data SET STORAGE EXTERNAL`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`DROP TABLE blob_chunks`);
    await q.query(`DROP TABLE blobs`);
  }
}
