import { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Events and webhooks (src/events, src/webhooks, src/crypto).
 * - events: the transactional outbox. A row is written in the transaction of the change it
 *   describes; `seq` orders the stream (Last-Event-ID replay), `dispatched_at` is set once the
 *   relay has fanned it out to webhook deliveries and live streams. `payload` is json, not
 *   jsonb, so receivers get the item's fields in the API's order.
 * - webhooks: registrations; the secret is stored encrypted (secret_sealed).
 * - webhook_deliveries: one row per (event, webhook), the truth about what is owed to whom;
 *   Bull only schedules retries, so a lost Redis loses nothing. `body` is the exact text sent.
 *   `attempt_log` holds every attempt's outcome (a bounded list: the schedule's length plus
 *   manual retries), so recording an attempt writes one row, not two.
 * - service_keys: the generated encryption key when SVC_ENCRYPTION_KEY is unset (not in production).
 */
export class EventsAndWebhooks1732300001000 implements MigrationInterface {
  name = 'EventsAndWebhooks1732300001000';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`CREATE TABLE service_keys (name text PRIMARY KEY, value text NOT NULL, created_at timestamptz NOT NULL DEFAULT now())`);
    await q.query(`
      CREATE TABLE events (
        tenant_id uuid NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
        id uuid NOT NULL,
        seq bigint GENERATED ALWAYS AS IDENTITY,
        name text NOT NULL,
        credential_id text NOT NULL,
        audience jsonb NOT NULL,
        payload json NOT NULL,
        created_at timestamptz NOT NULL DEFAULT now(),
        dispatched_at timestamptz,
        PRIMARY KEY (tenant_id, id)
      )`);
    await q.query(`CREATE UNIQUE INDEX events_tenant_seq ON events (tenant_id, seq)`);
    await q.query(`CREATE INDEX events_undispatched ON events (seq) WHERE dispatched_at IS NULL`);
    await q.query(`CREATE INDEX events_created ON events (created_at)`);
    await q.query(`
      CREATE TABLE webhooks (
        tenant_id uuid NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
        id uuid NOT NULL,
        url text NOT NULL,
        events text[] NOT NULL,
        type_filter text[],
        disabled boolean NOT NULL DEFAULT false,
        secret_sealed text NOT NULL,
        credential_id text NOT NULL,
        created_at timestamptz NOT NULL DEFAULT now(),
        updated_at timestamptz NOT NULL DEFAULT now(),
        PRIMARY KEY (tenant_id, id)
      )`);
    await q.query(`CREATE INDEX webhooks_tenant_created ON webhooks (tenant_id, created_at DESC, id DESC)`);
    await q.query(`
      CREATE TABLE webhook_deliveries (
        tenant_id uuid NOT NULL,
        id uuid NOT NULL,
        webhook_id uuid NOT NULL,
        event_id uuid NOT NULL,
        event text NOT NULL,
        body text NOT NULL,
        status text NOT NULL CHECK (status IN ('pending', 'succeeded', 'failed')),
        attempts integer NOT NULL DEFAULT 0,
        next_attempt_at timestamptz,
        lease_until timestamptz,
        last_status_code integer,
        last_error text,
        attempt_log jsonb NOT NULL DEFAULT '[]',
        created_at timestamptz NOT NULL DEFAULT now(),
        updated_at timestamptz NOT NULL DEFAULT now(),
        PRIMARY KEY (tenant_id, id),
        FOREIGN KEY (tenant_id, webhook_id) REFERENCES webhooks (tenant_id, id) ON DELETE CASCADE
      )`);
    await q.query(`CREATE INDEX webhook_deliveries_list ON webhook_deliveries (tenant_id, webhook_id, created_at DESC, id DESC)`);
    await q.query(`CREATE INDEX webhook_deliveries_due ON webhook_deliveries (next_attempt_at) WHERE status = 'pending'`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`DROP TABLE webhook_deliveries, webhooks, events, service_keys`);
  }
}
