import { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Edge types and edges. Every key leads with tenant_id. Edges cascade away with either of
 * their items (a purge removes its edges); an edge type with edges cannot be dropped
 * (RESTRICT), the service turns that into 409 `conflict`.
 */
export class Edges1732300000200 implements MigrationInterface {
  name = 'Edges1732300000200';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`
      CREATE TABLE edge_types (
        tenant_id uuid NOT NULL,
        name text NOT NULL,
        source_types text[] NOT NULL,
        target_types text[] NOT NULL,
        cardinality text NOT NULL DEFAULT 'many' CHECK (cardinality IN ('one', 'many')),
        acyclic boolean NOT NULL DEFAULT false,
        description text,
        created_at timestamptz NOT NULL DEFAULT now(),
        PRIMARY KEY (tenant_id, name)
      )`);
    await q.query(`
      CREATE TABLE edges (
        tenant_id uuid NOT NULL,
        id uuid NOT NULL,
        edge_type text NOT NULL,
        source_id uuid NOT NULL,
        target_id uuid NOT NULL,
        properties jsonb NOT NULL DEFAULT '{}',
        created_by text NOT NULL,
        created_at timestamptz NOT NULL,
        PRIMARY KEY (tenant_id, id),
        CONSTRAINT edges_unique UNIQUE (tenant_id, edge_type, source_id, target_id),
        CONSTRAINT edges_source_fk FOREIGN KEY (tenant_id, source_id) REFERENCES items (tenant_id, id) ON DELETE CASCADE,
        CONSTRAINT edges_target_fk FOREIGN KEY (tenant_id, target_id) REFERENCES items (tenant_id, id) ON DELETE CASCADE,
        CONSTRAINT edges_type_fk FOREIGN KEY (tenant_id, edge_type) REFERENCES edge_types (tenant_id, name) ON DELETE RESTRICT
      )`);
    // The unique constraint's index serves (tenant, type, source) lookups too; these two serve
    // "edges of an item", outgoing and incoming, and the recursive cycle check.
    await q.query(`CREATE INDEX edges_by_source ON edges (tenant_id, source_id, edge_type)`);
    await q.query(`CREATE INDEX edges_by_target ON edges (tenant_id, target_id, edge_type)`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`DROP TABLE edges`);
    await q.query(`DROP TABLE edge_types`);
  }
}
