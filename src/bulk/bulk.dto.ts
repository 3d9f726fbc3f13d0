import { ApiProperty, ApiPropertyOptional } from '@nestjs/swagger';
import { Type } from 'class-transformer';
import { ArrayMinSize, IsArray, IsBoolean, IsIn, IsInt, IsObject, IsString, Min, ValidateNested } from 'class-validator';
import { PageQuery } from '../common/pagination';
import { CharLength, IsOptionalNonNull, IsRfc3339, IsTypePattern } from '../common/validation';
import type { Tier } from '../keys/api-key.entity';
import { IsPropertyClauses, IsTagList, PROPERTY_FILTER_DOC, SOURCE_FILTER_MAX_LENGTH, SOURCE_ID_MAX_LENGTH, TAGS_DOC } from '../items/items.dto';
import { ApiInteger, ApiIntegerOptional } from '../openapi/api-integer.decorator';
import { ItemState, STATES } from '../items/lifecycle';
import { MAX_PROPERTY_CLAUSES } from '../items/property-filter';
import { MAX_QUERY_LENGTH, MAX_QUERY_WORDS } from '../search/search-query';
import { IsSearchText } from '../search/search.dto';
import { BULK_ACTIONS, BulkAction, JOB_STATUSES, JobStatus, MAX_ITEMS_CEILING, MAX_ITEMS_DEFAULT } from './bulk-actions';

export class BulkFilterDto {
  @ApiPropertyOptional({ description: 'Type name or pattern, as in `GET /items` (`core.note`, `core.*` for it and its subtypes, `*`)', example: 'core.note' })
  @IsOptionalNonNull() @IsTypePattern()
  type?: string;

  @ApiPropertyOptional({ description: 'Items written by the credential with this source' })
  @IsOptionalNonNull() @IsString() @CharLength(1, SOURCE_FILTER_MAX_LENGTH)
  source?: string;

  @ApiPropertyOptional({ description: 'The item with this `source_id`, as in `GET /items`: with `source`, that source\'s; without, the caller\'s own' })
  @IsOptionalNonNull() @IsString() @CharLength(1, SOURCE_ID_MAX_LENGTH)
  source_id?: string;

  // Empty, either would match nothing, as `GET /items` refuses `tags=` and `source=`: leave it out for any.
  @ApiPropertyOptional({ ...TAGS_DOC, minItems: 1, description: 'Items carrying all of these tags (at least one; leave it out for any)' })
  @IsOptionalNonNull() @ArrayMinSize(1, { message: 'must name at least one tag; leave it out for items with any tags' }) @IsTagList({ named: true })
  tags?: string[];

  @ApiPropertyOptional({ format: 'date-time', description: 'timestamp >= since' })
  @IsOptionalNonNull() @IsRfc3339()
  since?: string;

  @ApiPropertyOptional({ format: 'date-time', description: 'timestamp < until' })
  @IsOptionalNonNull() @IsRfc3339()
  until?: string;

  @ApiPropertyOptional({ format: 'date-time', description: 'updated_at >= updated_since, as in `GET /items`' })
  @IsOptionalNonNull() @IsRfc3339()
  updated_since?: string;

  @ApiPropertyOptional({ format: 'date-time', description: 'updated_at < updated_until' })
  @IsOptionalNonNull() @IsRfc3339()
  updated_until?: string;

  @ApiPropertyOptional({ type: [String], minItems: 1, maxItems: MAX_PROPERTY_CLAUSES, description: `Property clauses, as \`GET /items\`' \`property\`: ${PROPERTY_FILTER_DOC}` })
  @IsOptionalNonNull() @IsArray() @ArrayMinSize(1, { message: 'must hold at least one clause; leave it out for any properties' }) @IsPropertyClauses()
  property?: string[];

  @ApiPropertyOptional({ maxLength: MAX_QUERY_LENGTH, description: `Free text with the semantics of \`GET /search\`'s \`q\` (without its typo fallback), at most ${MAX_QUERY_WORDS} words` })
  @IsOptionalNonNull() @IsSearchText()
  filter?: string;

  @ApiPropertyOptional({ enum: [...STATES, 'all'], default: 'active', description: 'As in `GET /items`: only active items unless given' })
  @IsOptionalNonNull() @IsIn([...STATES, 'all'])
  state?: ItemState | 'all';

  @ApiPropertyOptional({ enum: ['library', 'feed', 'all'], default: 'all' })
  @IsOptionalNonNull() @IsIn(['library', 'feed', 'all'])
  tier?: Tier | 'all';
}

export class BulkActionDto {
  @ApiProperty({ enum: BULK_ACTIONS })
  @IsIn(BULK_ACTIONS)
  action: BulkAction;

  @ApiPropertyOptional({ type: BulkFilterDto, description: 'Which items; the same selection as `GET /items` with these parameters. Omitted: every active item.' })
  @IsOptionalNonNull() @IsObject() @ValidateNested() @Type(() => BulkFilterDto)
  filter?: BulkFilterDto;

  @ApiPropertyOptional({ default: false, description: 'Answer the matched ids and count; write nothing' })
  @IsOptionalNonNull() @IsBoolean()
  dry_run?: boolean;

  @ApiIntegerOptional({
    default: MAX_ITEMS_DEFAULT,
    minimum: 1,
    maximum: MAX_ITEMS_CEILING,
    description: `Most items the action may match; a larger match set, or a value above ${MAX_ITEMS_CEILING}, is 400 bulk_cap_exceeded`,
  })
  @IsOptionalNonNull() @IsInt() @Min(1)
  max_items?: number;

  @ApiPropertyOptional({ default: true, description: 'Record an event per changed item (webhooks, GET /events); the job\'s own bulk_job.* event is recorded either way' })
  @IsOptionalNonNull() @IsBoolean()
  emit_events?: boolean;

  @ApiPropertyOptional({ default: false, description: 'Run as a background job (202) whatever the match set\'s size' })
  @IsOptionalNonNull() @IsBoolean()
  async?: boolean;

  @ApiPropertyOptional({ description: 'purge: must be "PURGE"' })
  @IsOptionalNonNull() @IsString()
  confirm?: string;

  @ApiPropertyOptional({ enum: STATES, description: 'transition: the target state' })
  @IsOptionalNonNull() @IsIn(STATES)
  to_state?: ItemState;

  @ApiPropertyOptional({ ...TAGS_DOC, description: 'update_tags: tags to add (update_tags needs add_tags, remove_tags or both)' })
  @IsOptionalNonNull() @IsTagList()
  add_tags?: string[];

  @ApiPropertyOptional({ ...TAGS_DOC, description: 'update_tags: tags to remove (applied after the additions)' })
  @IsOptionalNonNull() @IsTagList({ named: true })
  remove_tags?: string[];

  @ApiPropertyOptional({ enum: ['library', 'feed'], description: 'update_tier: the new tier' })
  @IsOptionalNonNull() @IsIn(['library', 'feed'])
  tier?: Tier;

  @ApiPropertyOptional({ type: 'object', additionalProperties: true, description: 'update_properties: shallow-merged into each item\'s properties (null removes a key)' })
  @IsOptionalNonNull() @IsObject()
  properties?: Record<string, unknown>;

  @ApiPropertyOptional({ format: 'date-time', description: 'update_timestamp: the new timestamp' })
  @IsOptionalNonNull() @IsRfc3339()
  timestamp?: string;
}

export class BulkItemErrorDto {
  @ApiProperty() id: string;
  @ApiProperty({ example: 'invalid_transition' }) code: string;
  @ApiProperty() message: string;
  @ApiPropertyOptional({
    type: 'object',
    additionalProperties: true,
    description: 'Why, as a single write\'s error has it (e.g. `fields`: each bad field and why; `from`/`to` of a refused transition); a list keeps its first 5 entries',
  })
  details?: Record<string, unknown>;
}

export class BulkResultDto {
  @ApiProperty({ enum: BULK_ACTIONS }) action: BulkAction;
  @ApiInteger() matched: number;
  @ApiInteger() succeeded: number;
  @ApiInteger() errored: number;
  @ApiProperty() dry_run: boolean;
  @ApiPropertyOptional({ type: [String], description: 'Dry run: the matched ids. Direct run: the ids the action succeeded on. Absent from job results.' })
  ids?: string[];
  @ApiPropertyOptional({ type: [BulkItemErrorDto], description: 'Per-item failures (in a job: the first 1000; `errored` counts all)' })
  errors?: BulkItemErrorDto[];
  @ApiIntegerOptional({ description: 'purge: distinct blobs the purged items referred to (blobs are shared and stay)' })
  blob_hashes_referenced?: number;
}

export class BulkJobRequestDto {
  @ApiProperty({ type: BulkFilterDto, description: 'The filter as sent (`{}`: every active item)' }) filter: BulkFilterDto;
  @ApiProperty() emit_events: boolean;
  @ApiInteger() max_items: number;
  @ApiPropertyOptional({ enum: STATES }) to_state?: ItemState;
  @ApiPropertyOptional({ type: [String] }) add_tags?: string[];
  @ApiPropertyOptional({ type: [String] }) remove_tags?: string[];
  @ApiPropertyOptional({ enum: ['library', 'feed'] }) tier?: Tier;
  @ApiPropertyOptional({ type: [String], description: '`update_properties`: the names of the properties it sets (not their values)' }) property_names?: string[];
  @ApiPropertyOptional({ format: 'date-time' }) timestamp?: string;
}

export class BulkJobDto {
  @ApiProperty() id: string;
  @ApiProperty({ enum: BULK_ACTIONS }) action: BulkAction;
  @ApiPropertyOptional({ type: BulkJobRequestDto, description: 'What the job was asked to do, as submitted (absent for jobs submitted before this was kept)' })
  request?: BulkJobRequestDto;
  @ApiProperty({ enum: JOB_STATUSES }) status: JobStatus;
  @ApiInteger() matched: number;
  @ApiInteger() processed: number;
  @ApiInteger() succeeded: number;
  @ApiInteger() errored: number;
  @ApiProperty({ description: 'A cancel was asked for: a running job stops at its next chunk boundary and ends `cancelled`, even when the chunk it was running was its last' })
  cancel_requested: boolean;
  @ApiProperty({ format: 'date-time' }) created_at: string;
  @ApiPropertyOptional({ format: 'date-time' }) started_at?: string;
  @ApiPropertyOptional({ format: 'date-time' }) finished_at?: string;
  @ApiPropertyOptional({ description: 'Why a failed job stopped' }) error?: string;
  @ApiPropertyOptional({ type: BulkResultDto, description: 'Present once the job has ended (completed, failed or cancelled): what it did' })
  result?: BulkResultDto;
}

export class BulkJobList {
  @ApiProperty({ type: [BulkJobDto] }) jobs: BulkJobDto[];
  @ApiProperty({ type: String, nullable: true }) next_cursor: string | null;
}

export class ListBulkJobsQuery extends PageQuery {
  @ApiPropertyOptional({ enum: JOB_STATUSES })
  @IsOptionalNonNull() @IsIn(JOB_STATUSES)
  status?: JobStatus;
}
