/**
 * The transactional outbox: `record` is the one function every write path calls, inside the
 * transaction of the change, so an event exists exactly when its change committed (a rolled
 * back change, or a bulk element rolled back to its savepoint, leaves no event).
 *
 * An event's audience is stored with the ancestors of the item types it names, and of its item's
 * edge targets, as they stand in that transaction (`lineage`, see event-catalogue.ts
 * `lineageTypes`), so who receives the event, and which edges each sees, does not depend on the
 * types as they are when it is sent (a name deleted and made again under another parent).
 * Item writes hold the type catalogue's shared lock (types.service.ts `forWrite`): the types
 * cannot change under them.
 *
 * After a transaction that recorded events commits, the relay on this instance is woken at
 * once (TypeORM's afterTransactionCommit); the relay's own poll covers a process that died
 * between the commit and the wake-up.
 */
import { Injectable, OnModuleInit } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import { DataSource, EntityManager, EntitySubscriberInterface, TransactionCommitEvent } from 'typeorm';
import type { Principal } from '../auth/principal';
import { newId } from '../common/ids';
import { CORE_TENANT } from '../types/core-types';
import { Audience, EventName, EventSubject, lineageTypes } from './event-catalogue';

const PENDING = 'svc:eventsRecorded';

/**
 * Most events one statement inserts: a purge records an event per edge of its items, and in
 * one statement that grows with them without bound (past the statement timeout, for an item
 * with a few hundred thousand). Callers that gather events in batches use it too.
 */
export const EVENTS_PER_STATEMENT = 2000;

export interface RecordedEvent {
  name: EventName;
  audience: Audience;
  payload: EventSubject;
}

@Injectable()
export class Outbox implements OnModuleInit, EntitySubscriberInterface {
  private readonly listeners: Array<() => void> = [];

  constructor(@InjectDataSource() private readonly db: DataSource) {}

  onModuleInit(): void {
    this.db.subscribers.push(this);
  }

  /** Called by the relay: `wake` runs after every commit that recorded events. */
  onCommit(wake: () => void): void {
    this.listeners.push(wake);
  }

  async record(m: EntityManager, p: Principal, name: EventName, audience: Audience, payload: EventSubject): Promise<void> {
    await this.recordMany(m, p, [{ name, audience, payload }]);
  }

  /** `record` for a batch of changes (bulk actions): a statement per EVENTS_PER_STATEMENT, in order. */
  async recordMany(m: EntityManager, p: Principal, events: RecordedEvent[]): Promise<void> {
    if (!events.length) return;
    for (let from = 0; from < events.length; from += EVENTS_PER_STATEMENT) await this.insert(m, p, events.slice(from, from + EVENTS_PER_STATEMENT));
    if (m.queryRunner) m.queryRunner.data[PENDING] = true;
  }

  private async insert(m: EntityManager, p: Principal, events: RecordedEvent[]): Promise<void> {
    // One json parameter (json, not jsonb, keeps each payload's field order as rendered).
    // `up` walks each named type's parents (bounded, as a stray cycle would be endless).
    await m.query(
      `WITH RECURSIVE e AS (
         SELECT * FROM ROWS FROM (json_to_recordset($3::json) AS (id uuid, name text, audience jsonb, payload json, types jsonb))
           WITH ORDINALITY AS e(id, name, audience, payload, types, ord)
       ), up (type, ancestor, depth) AS (
         SELECT t.name, t.parent, 1 FROM item_types t
          WHERE t.tenant_id IN ($1, $4) AND t.parent IS NOT NULL AND t.name IN (SELECT jsonb_array_elements_text(e.types) FROM e)
         UNION ALL
         SELECT up.type, t.parent, up.depth + 1 FROM up JOIN item_types t ON t.tenant_id IN ($1, $4) AND t.name = up.ancestor
          WHERE t.parent IS NOT NULL AND up.depth < 64
       )
       INSERT INTO events (tenant_id, id, name, credential_id, audience, payload)
       SELECT $1, e.id, e.name, $2,
              CASE WHEN jsonb_array_length(e.types) = 0 THEN e.audience
                   ELSE e.audience || jsonb_build_object('lineage', (
                     SELECT jsonb_object_agg(n.name, coalesce((SELECT jsonb_agg(up.ancestor ORDER BY up.depth) FROM up WHERE up.type = n.name), '[]'))
                       FROM jsonb_array_elements_text(e.types) AS n(name))) END,
              e.payload
         FROM e ORDER BY e.ord`,
      [p.tenantId, p.credentialId, JSON.stringify(events.map((e) => ({ id: newId(), ...e, types: lineageTypes(e) }))), CORE_TENANT],
    );
  }

  afterTransactionCommit(event: TransactionCommitEvent): void {
    const data = event.queryRunner.data;
    if (!data[PENDING] || event.queryRunner.isTransactionActive) return; // a savepoint released, not the commit
    data[PENDING] = false;
    for (const wake of this.listeners) wake();
  }
}
