import { Controller, Get, Headers, Query, Res } from '@nestjs/common';
import { ApiHeader, ApiOkResponse, ApiOperation, ApiProperty, ApiPropertyOptional, ApiTags, OmitType } from '@nestjs/swagger';
import { IsOptional, IsString, MaxLength } from 'class-validator';
import type { FastifyReply } from 'fastify';
import { Caller } from '../auth/decorators';
import type { Principal } from '../auth/principal';
import { isPattern } from '../common/type-pattern';
import { FieldIssue, IsCommaList, IsQueryInt, splitCommaList, validationError } from '../common/validation';
import { ApiErrors } from '../openapi/api-errors.decorator';
import { ApiOAuth } from '../openapi/api-oauth.decorator';
import { EVENT_NAMES, isEventPattern, MAX_SUBSCRIPTION_PATTERNS } from './event-catalogue';
import { EventHistory, HISTORY_SCAN_EVENTS } from './event-history';
import { EventStream, StreamFilter } from './event-stream';
import { MAX_STREAMS_PER_CREDENTIAL, MAX_STREAMS_PER_TENANT, MAX_STREAMS_PER_USER } from './stream-slots';

export class EventStreamQuery {
  @ApiPropertyOptional({ description: `Comma list of event names or patterns (${EVENT_NAMES.join(', ')}), at most ${MAX_SUBSCRIPTION_PATTERNS}; default \`*\``, example: 'item.*,edge.created', maxLength: 2000 })
  @IsOptional() @IsCommaList(2000)
  events?: string;

  @ApiPropertyOptional({ description: `Comma list of type patterns limiting item events (at least one, at most ${MAX_SUBSCRIPTION_PATTERNS}; leave it out for every type)`, example: 'core.note,acme.*', maxLength: 2000 })
  @IsOptional() @IsCommaList(2000)
  type_filter?: string;

  @ApiPropertyOptional({
    description: 'Resume after this event id, for clients that cannot send the Last-Event-ID header on a reconnection (event-source-polyfill sends it so); the header wins when both are sent',
    maxLength: 200,
  })
  @IsOptional() @IsString() @MaxLength(200)
  lastEventId?: string;
}

export class EventHistoryQuery extends OmitType(EventStreamQuery, ['lastEventId'] as const) {
  @ApiPropertyOptional({ description: 'Start after this event id (an `id` of an event or of a stream\'s `id:` line), as a stream resumes after Last-Event-ID; not with `cursor`', maxLength: 200 })
  @IsOptional() @IsString() @MaxLength(200)
  after?: string;

  @ApiPropertyOptional({ minimum: 1, maximum: 100, default: 50 })
  @IsOptional() @IsQueryInt(1, 100)
  limit?: number;

  @ApiPropertyOptional({ description: 'Go on from a previous page\'s `next_cursor`' })
  @IsOptional() @IsString()
  cursor?: string;
}

class HistoryEventDto {
  @ApiProperty({ description: 'The event id (as a webhook delivery\'s X-Svc-Event-Id and a stream\'s `id:`)' }) id: string;
  @ApiProperty({ enum: EVENT_NAMES }) event: string;
  @ApiProperty({ format: 'date-time', description: 'When the change was written' }) created_at: string;
  @ApiProperty({ type: 'object', additionalProperties: true, description: 'The body a webhook gets: `{event, item}`, `{event, edge}` or `{event, job}`' }) data: object;
}

class EventHistoryDto {
  @ApiProperty({ type: [HistoryEventDto] }) events: HistoryEventDto[];
  @ApiProperty({ description: 'Where to go on from: on every page, also the last (call again later with it for what came since)' }) next_cursor: string;
  @ApiProperty({ description: 'Whether more events may follow now: false once the page reached the newest event' }) has_more: boolean;
}

/** The query's filter, held to a webhook's rules: at most MAX_SUBSCRIPTION_PATTERNS entries (none empty: IsCommaList). */
function parseFilter(q: Pick<EventStreamQuery, 'events' | 'type_filter'>): StreamFilter {
  const events = q.events === undefined ? ['*'] : splitCommaList(q.events);
  const typeFilter = q.type_filter === undefined ? null : splitCommaList(q.type_filter);
  const issues: FieldIssue[] = [];
  const tooMany = `must list at most ${MAX_SUBSCRIPTION_PATTERNS} patterns`;
  // As a webhook's lists (webhooks.dto.ts: ArrayUnique).
  const repeated = (list: string[]) => new Set(list).size !== list.length;
  if (repeated(events)) issues.push({ field: 'events', message: 'must not list a pattern twice' });
  if (typeFilter && repeated(typeFilter)) issues.push({ field: 'type_filter', message: 'must not list a pattern twice' });
  if (events.length > MAX_SUBSCRIPTION_PATTERNS) issues.push({ field: 'events', message: tooMany });
  else if (!events.every((p) => isPattern(p) && isEventPattern(p))) {
    issues.push({ field: 'events', message: `must list event names (${EVENT_NAMES.join(', ')}), patterns such as "item.*", or "*"` });
  }
  if (typeFilter && typeFilter.length > MAX_SUBSCRIPTION_PATTERNS) issues.push({ field: 'type_filter', message: tooMany });
  else if (typeFilter && !typeFilter.every(isPattern)) issues.push({ field: 'type_filter', message: 'must list type names or patterns such as "acme.*"' });
  if (issues.length) throw validationError(issues);
  return { events, typeFilter };
}

@ApiTags('events')
@Controller('events')
export class EventsController {
  constructor(
    private readonly stream: EventStream,
    private readonly history: EventHistory,
  ) {}

  @Get('history')
  @ApiOAuth({ note: 'the events about what the token may read, as on `GET /events`.' })
  @ApiOperation({
    summary: 'The events kept, oldest first, as JSON pages (for polling)',
    description:
      'What `GET /events` would send the same credential, in the same order (publication order), filtered by `events`, `type_filter` and what the credential may read, ' +
      'kept `EVENT_RETENTION_DAYS`. Follow `next_cursor` while `has_more`; then call again later with the last `next_cursor` for what came since. ' +
      `A page reads at most ${HISTORY_SCAN_EVENTS} events: one that finds fewer than \`limit\` the credential may have ends there (\`has_more\` true). ` +
      'An event may come twice (once in a while, after an instance died while publishing it): dedupe on `id`.',
  })
  @ApiOkResponse({ type: EventHistoryDto })
  @ApiErrors(400, 401)
  list(@Caller() caller: Principal, @Query() q: EventHistoryQuery): Promise<EventHistoryDto> {
    return this.history.page(caller, parseFilter(q), q);
  }

  @Get()
  @ApiOAuth({ note: 'the events about what the token may read (`<type>:read`, `edge.<type>:read`), tags with `metadata:read`, and its own jobs\' events.' })
  @ApiOperation({
    summary: 'Server-sent event stream of the tenant\'s events',
    description:
      'Each event: `id:` (send it back as Last-Event-ID to resume), `event:` the event name, `data:` the same JSON body a webhook gets. ' +
      'Every stream gets the events in one order, the order they were published in; a resume replays the events published after Last-Event-ID in that order, then goes live. ' +
      'Filtered by `events`, `type_filter` and what the credential may read. A comment line every `EVENTS_HEARTBEAT_SECONDS` (15 s by default) keeps the connection alive. ' +
      'After an unknown or expired Last-Event-ID the stream starts with a `stream.reset` event. A revoked credential\'s stream is closed. ' +
      'A client that stops reading (more than 8 MiB behind, or taking nothing for four heartbeats) is cut off: reconnect with Last-Event-ID. ' +
      `At most ${MAX_STREAMS_PER_CREDENTIAL} open streams per credential, ${MAX_STREAMS_PER_USER} per user across the user's OAuth grants, and ${MAX_STREAMS_PER_TENANT} per tenant (all instances): past that, 429 rate_limited.`,
  })
  @ApiHeader({ name: 'Last-Event-ID', required: false, description: 'Resume after this event id' })
  // Only the 200 is an event stream; the errors are JSON, as everywhere (so no @ApiProduces).
  @ApiOkResponse({ description: 'The event stream', content: { 'text/event-stream': { schema: { type: 'string' } } } })
  @ApiErrors(400, 401, 429)
  async open(
    @Caller() caller: Principal,
    @Query() q: EventStreamQuery,
    @Headers('last-event-id') lastEventId: string | undefined,
    @Res() reply: FastifyReply,
  ): Promise<void> {
    await this.stream.open(caller, parseFilter(q), lastEventId || q.lastEventId || undefined, reply);
  }
}
