/**
 * Fan-out: which webhooks owe a delivery for a batch of events, and with which body. A webhook
 * gets an event when it is enabled, its `events` and `type_filter` select it, and the
 * credential that registered it may, as of now, read what the event is about: a key revoked
 * or narrowed since registration stops receiving. The body is rendered for that credential
 * (unreadable extension namespaces left out) and stored, so every attempt sends the same bytes.
 * The deliveries are inserted already leased to this instance, ready for their first attempt.
 */
import { Injectable } from '@nestjs/common';
import type { Principal } from '../auth/principal';
import { newId } from '../common/ids';
import type { Sql } from '../database/bookkeeping-db';
import { mayReceive, renderBody, selects, StoredEvent } from '../events/event-catalogue';
import { CredentialsService } from '../auth/credentials.service';
import { TypesService } from '../types/types.service';
import type { Prepared } from './webhook-dispatcher';

interface Subscription {
  tenant_id: string;
  id: string;
  url: string;
  secret_sealed: string;
  events: string[];
  type_filter: string[] | null;
  credential_id: string;
}

@Injectable()
export class WebhookFanout {
  constructor(
    private readonly credentials: CredentialsService,
    private readonly types: TypesService,
  ) {}

  /** Inserts the deliveries the events owe (in the caller's transaction), leased for `leaseMs`. */
  async plan(sql: Sql, events: StoredEvent[], leaseMs: number): Promise<Prepared[]> {
    const tenants = [...new Set(events.map((e) => e.tenant_id))];
    const subscriptions = await sql<Subscription>(
      `SELECT tenant_id, id, url, secret_sealed, events, type_filter, credential_id FROM webhooks
        WHERE tenant_id = ANY($1::uuid[]) AND NOT disabled`,
      [tenants],
    );
    if (!subscriptions.length) return [];
    const owners = new Map<string, Principal | null>();
    const planned: Prepared[] = [];
    for (const e of events) {
      const mine = subscriptions.filter((s) => s.tenant_id === e.tenant_id);
      if (!mine.length) continue;
      const types = await this.types.catalog(e.tenant_id);
      const bodies = new Map<string, string>(); // webhooks of one owner get the same body
      for (const s of mine) {
        if (!selects(s.events, s.type_filter, e, types)) continue;
        const ownerKey = `${s.tenant_id}:${s.credential_id}`;
        if (!owners.has(ownerKey)) owners.set(ownerKey, await this.credentials.principalById(s.tenant_id, s.credential_id));
        const owner = owners.get(ownerKey);
        if (!owner || !mayReceive(owner, e, types)) continue;
        if (!bodies.has(ownerKey)) bodies.set(ownerKey, renderBody(owner, e));
        planned.push({
          tenantId: e.tenant_id,
          deliveryId: newId(),
          webhookId: s.id,
          event: e.name,
          eventId: e.id,
          body: bodies.get(ownerKey)!,
          attempts: 0,
          url: s.url,
          secretSealed: s.secret_sealed,
          leaseUntil: Date.now() + leaseMs,
        });
      }
    }
    if (planned.length) {
      // Webhooks of one owner share a body: each distinct body is sent once, by its index.
      const bodies = [...new Set(planned.map((d) => d.body))];
      const indexOf = new Map(bodies.map((b, i) => [b, i + 1]));
      await sql(
        `INSERT INTO webhook_deliveries (tenant_id, id, webhook_id, event_id, event, body, status, next_attempt_at, lease_until)
         SELECT u.tenant_id, u.id, u.webhook_id, u.event_id, u.event, ($6::text[])[u.body], 'pending', now(), now() + make_interval(secs => $8::float8 / 1000)
           FROM unnest($1::uuid[], $2::uuid[], $3::uuid[], $4::uuid[], $5::text[], $7::int[]) AS u(tenant_id, id, webhook_id, event_id, event, body)`,
        [
          planned.map((d) => d.tenantId),
          planned.map((d) => d.deliveryId),
          planned.map((d) => d.webhookId),
          planned.map((d) => d.eventId),
          planned.map((d) => d.event),
          bodies,
          planned.map((d) => indexOf.get(d.body)),
          leaseMs,
        ],
      );
    }
    return planned;
  }
}
