/**
 * Reading published events back from the outbox, in publication order (`published_seq`, see
 * event-relay.ts): the pages a resuming stream replays (event-stream.ts) and the pages of
 * `GET /events/history` (event-history.ts), and where a resume after an event id starts.
 */
import type { DataSource } from 'typeorm';
import { byteBoundedPage } from '../common/pagination';
import { isId } from '../common/ids';
import { patternToSql } from '../common/type-pattern';
import { EVENT_COLUMNS, StoredEvent } from './event-catalogue';

/** An event as the relay publishes it: with its place in the publication order. */
export interface PublishedEvent extends StoredEvent {
  published_seq: string;
  /** Where it was first published, when this is a later publication (its relay's lease lapsed before the event was recorded). */
  first_published_seq?: string | null;
}

export const REPLAY_PAGE = 500;
/**
 * Most bytes of event bodies a replay page holds (at least one event): 500 events of a 1 MB
 * item were parsed and rendered at once, 5.5 s of the event loop and 1.2 GB of memory.
 */
export const REPLAY_PAGE_BYTES = 4 * 1024 * 1024;

/**
 * A page of the tenant's events published after $2 whose names the reader's `events` patterns
 * select ($3, $4: `replayedNames`), at most `limit` (an SQL expression), so that pages carry
 * only events it may be sent. Taking every event and leaving the rest to the reader, a resume
 * from the oldest event kept read the whole history whatever the filter (531,958 events, 359
 * MB, 25.7 s; with a filter that matched nothing, 985 pages read and nothing sent).
 * `type_filter` and what the credential may read are judged by the reader alone: both go
 * through the types' ancestors. Ordered by the column (`ord`): the bare name would mean the
 * text output column ('10' < '9').
 */
export function publishedPageSql(limit: string): string {
  return byteBoundedPage(
    `SELECT ${EVENT_COLUMNS}, published_seq::text AS published_seq, nullif(first_published_seq, published_seq)::text AS first_published_seq,
            events.published_seq AS ord FROM events
      WHERE tenant_id = $1 AND published_seq > $2::bigint
        AND ($3::text[] IS NULL OR name = ANY($3::text[]) OR EXISTS (SELECT FROM unnest($4::text[]) AS under(prefix) WHERE starts_with(name, prefix)))
      ORDER BY events.published_seq LIMIT ${limit}`,
    'ord',
    'octet_length(payload::text)',
    REPLAY_PAGE_BYTES,
  );
}

/** A stream's replay page. */
export const REPLAY_PAGE_QUERY = publishedPageSql(String(REPLAY_PAGE));

/**
 * The page query's $3 and $4 for `events` patterns, as the one pattern rule reads them
 * (patternToSql): the names matched exactly, and the prefixes of the names below (`a.b.` of
 * `a.b.*`); null for `*`, which matches every name.
 */
export function replayedNames(patterns: readonly string[]): [string[] | null, string[]] {
  const conditions = patterns.map(patternToSql);
  if (conditions.some((c) => c.all)) return [null, []];
  return [conditions.flatMap((c) => (c.exact ? [c.exact] : [])), conditions.flatMap((c) => (c.prefix ? [c.prefix] : []))];
}

/** The publication number a resume after `eventId` starts after; null when the outbox does not keep that event. */
export async function resumePoint(db: DataSource, tenantId: string, eventId: string, retentionDays: number): Promise<string | null> {
  if (!isId(eventId)) return null;
  const [from]: Array<{ published_seq: string }> = await db.query(
    // From the event's first place: one taken up again since (its relay died) was published
    // again later, and resuming from there would skip what was published in between. Not from
    // one past the retention period, though still stored (the janitor has yet to pass, or a
    // delivery of it is pending): events after it may be gone already, a gap a replay would hide.
    `SELECT coalesce(first_published_seq, published_seq)::text AS published_seq FROM events
      WHERE tenant_id = $1 AND id = $2 AND published_seq IS NOT NULL AND created_at >= now() - make_interval(days => $3)`,
    [tenantId, eventId, retentionDays],
  );
  return from?.published_seq ?? null;
}
