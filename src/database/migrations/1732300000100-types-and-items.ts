import { MigrationInterface, QueryRunner } from 'typeorm';

/** Core type schemas seeded here are immutable: later changes come as new migrations. */
const CORE_TENANT = '00000000-0000-0000-0000-000000000000';

const str = { type: 'string' };
const CORE_TYPES: Array<{ name: string; schema: Record<string, unknown>; merge_policy?: Record<string, string> }> = [
  { name: 'core.note', schema: { type: 'object', properties: { title: str, body: str } } },
  {
    name: 'core.bookmark',
    schema: { type: 'object', properties: { url: { type: 'string', format: 'uri' }, title: str, description: str, body: str }, required: ['url'] },
  },
  {
    name: 'core.document',
    schema: { type: 'object', properties: { title: str, body: str, description: str, mime_type: str, blob: { type: 'string', pattern: '^sha256:[0-9a-f]{64}$' } }, required: ['title'] },
  },
  {
    name: 'core.task',
    schema: {
      type: 'object',
      properties: {
        title: str,
        description: str,
        status: { type: 'string', enum: ['open', 'in_progress', 'done', 'cancelled'] },
        due_at: { type: 'string', format: 'date-time' },
        priority: { type: 'integer', minimum: 0, maximum: 5 },
      },
      required: ['title'],
    },
  },
  {
    name: 'core.contact',
    schema: {
      type: 'object',
      properties: {
        name: str,
        email: { type: 'string', format: 'email' },
        phone: str,
        organization: str,
        description: str,
        notes: str,
      },
      required: ['name'],
    },
  },
  {
    name: 'core.event',
    schema: {
      type: 'object',
      properties: {
        title: str,
        description: str,
        location: str,
        starts_at: { type: 'string', format: 'date-time' },
        ends_at: { type: 'string', format: 'date-time' },
      },
      required: ['title', 'starts_at'],
    },
  },
];

export class TypesAndItems1732300000100 implements MigrationInterface {
  name = 'TypesAndItems1732300000100';

  async up(q: QueryRunner): Promise<void> {
    // Core types live under the all-zero tenant id so every key still leads with tenant_id.
    await q.query(`
      CREATE TABLE item_types (
        tenant_id uuid NOT NULL,
        name text NOT NULL,
        parent text,
        schema jsonb NOT NULL,
        resolved_schema jsonb NOT NULL,
        merge_policy jsonb NOT NULL DEFAULT '{}',
        core boolean NOT NULL DEFAULT false,
        version integer NOT NULL DEFAULT 1,
        created_at timestamptz NOT NULL DEFAULT now(),
        updated_at timestamptz NOT NULL DEFAULT now(),
        PRIMARY KEY (tenant_id, name)
      )`);
    await q.query(`CREATE INDEX item_types_parent ON item_types (tenant_id, parent)`);
    for (const t of CORE_TYPES) {
      await q.query(
        `INSERT INTO item_types (tenant_id, name, parent, schema, resolved_schema, merge_policy, core) VALUES ($1, $2, NULL, $3, $3, $4, true)`,
        [CORE_TENANT, t.name, JSON.stringify(t.schema), JSON.stringify(t.merge_policy ?? {})],
      );
    }
    await q.query(`
      CREATE TABLE items (
        tenant_id uuid NOT NULL REFERENCES tenants(id) ON DELETE CASCADE,
        id uuid NOT NULL,
        type text NOT NULL,
        properties jsonb NOT NULL DEFAULT '{}',
        state text NOT NULL CHECK (state IN ('active', 'archived', 'trashed', 'revoked')),
        version integer NOT NULL DEFAULT 1,
        schema_version integer NOT NULL DEFAULT 1,
        source text NOT NULL,
        source_id text,
        "timestamp" timestamptz NOT NULL,
        tier text NOT NULL CHECK (tier IN ('library', 'feed')),
        device text,
        capture_latitude double precision,
        capture_longitude double precision,
        tags text[] NOT NULL DEFAULT '{}',
        extensions jsonb NOT NULL DEFAULT '{}',
        created_at timestamptz NOT NULL,
        updated_at timestamptz NOT NULL,
        PRIMARY KEY (tenant_id, id)
      )`);
    await q.query(`CREATE UNIQUE INDEX items_natural_key ON items (tenant_id, source, source_id) WHERE source_id IS NOT NULL`);
    await q.query(`CREATE INDEX items_listing ON items (tenant_id, state, created_at DESC, id DESC)`);
    await q.query(`CREATE INDEX items_tenant_type ON items (tenant_id, type)`);
    await q.query(`CREATE INDEX items_tags ON items USING gin (tags)`);
    await q.query(`
      CREATE TABLE item_versions (
        tenant_id uuid NOT NULL,
        item_id uuid NOT NULL,
        version integer NOT NULL,
        snapshot jsonb NOT NULL,
        changed_by text NOT NULL,
        created_at timestamptz NOT NULL DEFAULT now(),
        PRIMARY KEY (tenant_id, item_id, version),
        FOREIGN KEY (tenant_id, item_id) REFERENCES items (tenant_id, id) ON DELETE CASCADE
      )`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`DROP TABLE item_versions`);
    await q.query(`DROP TABLE items`);
    await q.query(`DROP TABLE item_types`);
  }
}
