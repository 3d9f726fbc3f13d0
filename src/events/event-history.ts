/**
 * `GET /events/history`: the events the outbox keeps, as JSON pages in the order streams get
 * them (publication order), for clients that poll rather than hold a stream open (a scheduled
 * function, a batch job). Filtered exactly as a stream is (`selects`, `mayReceive`,
 * `renderBody`): what `GET /events` would have sent the same credential, in the same order.
 */
import { Injectable } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import { DataSource } from 'typeorm';
import type { Principal } from '../auth/principal';
import { Bounded, cutShort, decodeSequenceCursor, encodeSequenceCursor } from '../common/pagination';
import { validationError } from '../common/validation';
import { AppConfig } from '../config/app-config';
import { TypeCatalogService } from '../types/type-catalog';
import { mayReceive, renderBody, selects } from './event-catalogue';
import type { StreamFilter } from './event-stream';
import { PublishedEvent, publishedPageSql, replayedNames, resumePoint } from './published-events';

/**
 * Most events a page reads looking for its `limit` of those the caller may have: past it, the
 * page ends with what it found and a cursor from there, so that a credential that may read
 * little of a busy tenant's events still gets an answer in bounded time.
 */
export const HISTORY_SCAN_EVENTS = 1000;
const HISTORY_PAGE_QUERY = publishedPageSql('$5');

export interface HistoryEvent {
  id: string;
  event: string;
  created_at: string;
  data: object;
}

export interface EventHistoryPage {
  events: HistoryEvent[];
  next_cursor: string;
  has_more: boolean;
}

@Injectable()
export class EventHistory {
  constructor(
    @InjectDataSource() private readonly db: DataSource,
    private readonly config: AppConfig,
    private readonly typeCatalog: TypeCatalogService,
  ) {}

  async page(p: Principal, filter: StreamFilter, q: { after?: string; cursor?: string; limit?: number }): Promise<EventHistoryPage> {
    const limit = q.limit ?? 50;
    let position = await this.start(p, q);
    const types = await this.typeCatalog.catalog(p.tenantId);
    const events: HistoryEvent[] = [];
    let scanned = 0;
    for (;;) {
      const asked = Math.min(limit - events.length, HISTORY_SCAN_EVENTS - scanned);
      const rows: Array<Bounded<PublishedEvent>> = await this.db.query(HISTORY_PAGE_QUERY, [p.tenantId, position, ...replayedNames(filter.events), asked]);
      for (const e of rows) {
        position = e.published_seq;
        scanned++;
        if (!selects(filter.events, filter.typeFilter, e, types) || !mayReceive(p, e, types)) continue;
        events.push({ id: e.id, event: e.name, created_at: e.created_at, data: JSON.parse(renderBody(p, e, types)) as object });
      }
      const ended = rows.length < asked && !cutShort(rows);
      // A page full of events, or of reading: the rest may hold more.
      if (events.length >= limit || scanned >= HISTORY_SCAN_EVENTS || ended) {
        return { events, next_cursor: encodeSequenceCursor(position, 'events'), has_more: !ended };
      }
    }
  }

  /** Where the page starts: after the cursor's place, after the event `after`, or at the start of what is kept. */
  private async start(p: Principal, q: { after?: string; cursor?: string }): Promise<string> {
    if (q.cursor !== undefined && q.after !== undefined) throw validationError([{ field: 'after', message: 'goes without cursor: the cursor already says where to go on from' }]);
    if (q.cursor !== undefined) return decodeSequenceCursor(q.cursor, 'events')!;
    if (q.after === undefined) return '0';
    const from = await resumePoint(this.db, p.tenantId, q.after, this.config.EVENT_RETENTION_DAYS);
    if (from === null) throw validationError([{ field: 'after', message: 'is not the id of an event kept (unknown, or older than EVENT_RETENTION_DAYS): start without it' }]);
    return from;
  }
}
