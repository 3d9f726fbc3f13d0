/**
 * The transactional outbox: `record` is the one function every write path calls, inside the
 * transaction of the change, so an event exists exactly when its change committed (a rolled
 * back change, or a bulk element rolled back to its savepoint, leaves no event).
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
import type { Audience, EventName, EventSubject } from './event-catalogue';

const PENDING = 'svc:eventsRecorded';

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

  /** `record` for a batch of changes (bulk actions): one statement. */
  async recordMany(m: EntityManager, p: Principal, events: RecordedEvent[]): Promise<void> {
    if (!events.length) return;
    // One json parameter (json, not jsonb, keeps each payload's field order as rendered).
    await m.query(
      `INSERT INTO events (tenant_id, id, name, credential_id, audience, payload)
       SELECT $1, e.id, e.name, $2, e.audience, e.payload FROM json_to_recordset($3::json) AS e(id uuid, name text, audience jsonb, payload json)`,
      [p.tenantId, p.credentialId, JSON.stringify(events.map((e) => ({ id: newId(), ...e })))],
    );
    if (m.queryRunner) m.queryRunner.data[PENDING] = true;
  }

  afterTransactionCommit(event: TransactionCommitEvent): void {
    const data = event.queryRunner.data;
    if (!data[PENDING] || event.queryRunner.isTransactionActive) return; // a savepoint released, not the commit
    data[PENDING] = false;
    for (const wake of this.listeners) wake();
  }
}
