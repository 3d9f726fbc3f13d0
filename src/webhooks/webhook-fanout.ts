/**
 * Fan-out: which webhooks owe a delivery for a batch of events, and with which body. A webhook
 * gets an event when it is enabled, its `events` and `type_filter` select it, and the
 * credential that registered it may, as of now, read what the event is about: a key revoked
 * or narrowed since registration stops receiving. The body is rendered for that credential
 * (unreadable extension namespaces left out) and stored, so every attempt sends the same bytes.
 */
import { Injectable } from '@nestjs/common';
import { EntityManager } from 'typeorm';
import { newId } from '../common/ids';
import { mayReceive, renderBody, selects, StoredEvent } from '../events/event-catalogue';
import { KeysService } from '../keys/keys.service';
import { TypesService } from '../types/types.service';
import type { DeliveryRef } from './webhook-dispatcher';

interface Subscription {
  tenant_id: string;
  id: string;
  events: string[];
  type_filter: string[] | null;
  credential_id: string;
}

@Injectable()
export class WebhookFanout {
  constructor(
    private readonly keys: KeysService,
    private readonly types: TypesService,
  ) {}

  /** Inserts the deliveries the events owe (in the caller's transaction) and returns them. */
  async plan(m: EntityManager, events: StoredEvent[]): Promise<DeliveryRef[]> {
    const tenants = [...new Set(events.map((e) => e.tenant_id))];
    const subscriptions: Subscription[] = await m.query(
      `SELECT tenant_id, id, events, type_filter, credential_id FROM webhooks WHERE tenant_id = ANY($1::uuid[]) AND NOT disabled`,
      [tenants],
    );
    if (!subscriptions.length) return [];
    const rows: Array<[string, string, string, string, string, string]> = [];
    const refs: DeliveryRef[] = [];
    for (const e of events) {
      const mine = subscriptions.filter((s) => s.tenant_id === e.tenant_id);
      if (!mine.length) continue;
      const types = await this.types.catalog(e.tenant_id);
      for (const s of mine) {
        if (!selects(s.events, s.type_filter, e, types)) continue;
        const owner = await this.keys.principalById(s.tenant_id, s.credential_id);
        if (!owner || !mayReceive(owner, e, types)) continue;
        const id = newId();
        rows.push([id, s.id, e.id, e.name, renderBody(owner, e), e.tenant_id]);
        refs.push({ tenantId: e.tenant_id, deliveryId: id, webhookId: s.id });
      }
    }
    if (rows.length) {
      await m.query(
        `INSERT INTO webhook_deliveries (tenant_id, id, webhook_id, event_id, event, body, status, next_attempt_at)
         SELECT u.tenant_id, u.id, u.webhook_id, u.event_id, u.event, u.body, 'pending', now()
           FROM unnest($1::uuid[], $2::uuid[], $3::uuid[], $4::text[], $5::text[], $6::uuid[]) AS u(id, webhook_id, event_id, event, body, tenant_id)`,
        [0, 1, 2, 3, 4, 5].map((i) => rows.map((r) => r[i])),
      );
    }
    return refs;
  }
}
