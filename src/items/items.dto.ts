import { applyDecorators } from '@nestjs/common';
import { ApiProperty, ApiPropertyOptional, ApiPropertyOptions } from '@nestjs/swagger';
import { Transform } from 'class-transformer';
import {
  ArrayMaxSize, IsArray, IsDefined, IsIn, IsInt, IsNumber, IsObject, IsOptional, IsString, Max, Min, ValidateBy,
} from 'class-validator';
import { CharLength, IsCommaList, isBlank, IsOptionalNonNull, IsQueryInt, IsRfc3339, MAX_INT4, MaxChars, Repeatable, TextParam, UNREADABLE_CHARACTER, Untransformed } from '../common/validation';
import { MAX_EDGES_PER_ITEM_WRITE } from '../edges/edge-rules';
import { ApiInteger } from '../openapi/api-integer.decorator';
import { EDGE_CLAUSE_RULE, isEdgeClause, PROPERTY_SCAN_ITEMS } from './item-filter';
import { isPropertyClause, MAX_PROPERTY_CLAUSE_LENGTH, MAX_PROPERTY_CLAUSES, PROPERTY_CLAUSE_RULE } from './property-filter';
import { STATES, ItemState } from './lifecycle';
import { DEFAULT_SORT, isSort, Sort, SORT_PATTERN, SORT_RULE } from './listing-order';
import type { Tier } from '../keys/api-key.entity';

export const MAX_TAGS = 100;
const TAG_RE = /^[^,\s][^,]{0,99}$/u;

const NAMED_TAG_LIST_RULE = `must be an array of at most ${MAX_TAGS} tags, each 1-100 characters without commas or surrounding spaces`;
const TAG_LIST_RULE = `${NAMED_TAG_LIST_RULE}, control characters, line separators or bidirectional overrides, nor only invisible characters`;

/** A tag's shape: 1-100 characters, no comma (lists of tags are comma lists in queries) nor surrounding spaces. */
const isTagShaped = (t: unknown): t is string => typeof t === 'string' && TAG_RE.test(t) && t.trim() === t;

/**
 * A tag written: also readable as names are (UNREADABLE_CHARACTER, isBlank): a tag of only a
 * zero-width space shows as none. Tags named to remove or to filter by keep to the shape alone,
 * so that one stored before the rule can still be found and taken off.
 */
const isWrittenTag = (t: unknown): boolean => isTagShaped(t) && !UNREADABLE_CHARACTER.test(t) && !isBlank(t);

/**
 * A list of tags, each kept once, where it first appears: an item carries a set of tags, and
 * every list that writes them (create, upsert, PATCH, metadata, bulk) comes through here. The
 * ArrayMaxSize is on the list as sent (as the document's maxItems is): a longer one is refused
 * before it is de-duplicated (plainToDto), and says so in the same words. `named`: tags to
 * remove or to filter by, held to their shape only (isWrittenTag).
 */
export const IsTagList = ({ named = false } = {}) => {
  const rule = named ? NAMED_TAG_LIST_RULE : TAG_LIST_RULE;
  return applyDecorators(
    Transform(({ value }) => (Array.isArray(value) ? [...new Set(value)] : value)),
    ArrayMaxSize(MAX_TAGS, { message: rule }),
    ValidateBy({
      name: 'isTagList',
      validator: {
        validate: (v: unknown) => Array.isArray(v) && v.length <= MAX_TAGS && v.every(named ? isTagShaped : isWrittenTag),
        defaultMessage: () => rule,
      },
    }),
  );
};

const IsObjectMap = (what: string) =>
  ValidateBy({
    name: 'isObjectMap',
    validator: {
      validate: (v: unknown) =>
        v !== null && typeof v === 'object' && !Array.isArray(v) && Object.values(v as object).every((x) => x === null || (typeof x === 'object' && !Array.isArray(x))),
      defaultMessage: () => `must map each ${what} to an object (or null to remove it)`,
    },
  });

const IsEdgeMap = () =>
  ValidateBy({
    name: 'isEdgeMap',
    validator: {
      validate: (v: unknown) =>
        v !== null && typeof v === 'object' && !Array.isArray(v) && Object.values(v as object).every((ids) => Array.isArray(ids) && ids.length <= MAX_EDGES_PER_ITEM_WRITE && ids.every((id) => typeof id === 'string')),
      defaultMessage: () => `must map each edge type to an array of target item ids, at most ${MAX_EDGES_PER_ITEM_WRITE} edges in all`,
    },
  });

/**
 * What IsTagList accepts, for the document: TAG_RE and its trim() check as one pattern (JS's
 * `\s` is the whitespace trim() removes). Lengths are in characters (code points).
 */
export const TAGS_DOC: ApiPropertyOptions = {
  type: [String],
  maxItems: MAX_TAGS,
  minLength: 1,
  maxLength: 100,
  pattern: /^[^,\s](?:[^,]{0,98}[^,\s])?$/,
  description: 'A set of tags; each also without control characters, line separators (U+2028, U+2029) or bidirectional overrides, nor only invisible characters',
  example: ['reading', 'work'],
};
const EXT_DOC: ApiPropertyOptions = {
  type: 'object',
  additionalProperties: { type: ['object', 'null'] },
  description: 'Extension namespace → object (null removes the namespace), gated by extension_permissions',
};

/** Fields shared by create and the writable subset of patch. */
class ItemWritableFields {
  @ApiPropertyOptional({ type: 'object', additionalProperties: true })
  @IsOptionalNonNull() @IsObject()
  properties?: Record<string, unknown>;

  @ApiPropertyOptional(TAGS_DOC)
  @IsOptionalNonNull() @IsTagList()
  tags?: string[];

  @ApiPropertyOptional({ enum: ['library', 'feed'] })
  @IsOptionalNonNull() @IsIn(['library', 'feed'])
  tier?: Tier;

  @ApiPropertyOptional({ enum: STATES, description: 'A new item starts `active` (the default) or `archived`; a change (PATCH, an upsert of an existing item) moves it only where the lifecycle allows. Else 400 `invalid_transition`' })
  @IsOptionalNonNull() @IsIn(STATES)
  state?: ItemState;

  @ApiPropertyOptional({ format: 'date-time' })
  @IsOptionalNonNull() @IsRfc3339()
  timestamp?: string;

  @ApiPropertyOptional({ maxLength: 200, nullable: true, type: String })
  @IsOptional() @IsString() @MaxChars(200)
  device?: string | null;

  @ApiPropertyOptional({ minimum: -90, maximum: 90, type: Number, nullable: true })
  @IsOptional() @IsNumber({ allowNaN: false, allowInfinity: false }) @Min(-90) @Max(90)
  capture_latitude?: number | null;

  @ApiPropertyOptional({ minimum: -180, maximum: 180, type: Number, nullable: true })
  @IsOptional() @IsNumber({ allowNaN: false, allowInfinity: false }) @Min(-180) @Max(180)
  capture_longitude?: number | null;

  @ApiPropertyOptional(EXT_DOC)
  @IsOptionalNonNull() @IsObjectMap('extension namespace')
  extensions?: Record<string, Record<string, unknown> | null>;
}

export const SOURCE_ID_MAX_LENGTH = 500;

export class CreateItemDto extends ItemWritableFields {
  // What the server applies when it creates an item (documentation only: the checks are inherited).
  @ApiPropertyOptional({ enum: ['library', 'feed'], description: 'Defaults to the key\'s default_tier' })
  tier?: Tier;

  @ApiProperty({ example: 'core.note' })
  @IsString() @CharLength(1, 200)
  type: string;

  @ApiPropertyOptional({ description: 'With the key\'s source, the natural key: posting it again updates the item (200)', maxLength: SOURCE_ID_MAX_LENGTH })
  @IsOptionalNonNull() @IsString() @CharLength(1, SOURCE_ID_MAX_LENGTH)
  source_id?: string;

  @ApiPropertyOptional({ type: String, description: 'Ignored: the source is stamped from the credential' })
  @IsOptional()
  source?: unknown;

  @ApiPropertyOptional({ type: 'object', additionalProperties: { type: 'array', items: { type: 'string' } }, description: 'Outgoing edges to create: edge type → target item ids' })
  @IsOptionalNonNull() @IsEdgeMap()
  edges?: Record<string, string[]>;
}

export class PatchItemDto extends ItemWritableFields {
  @ApiInteger({ description: 'The version the change is based on (optimistic concurrency)', minimum: 1, maximum: MAX_INT4 })
  @IsDefined({ message: 'is required: the version the change is based on' }) @IsInt() @Min(1) @Max(MAX_INT4)
  version: number;
}

export class RestoreItemDto {
  @ApiInteger({ description: 'The version the restore is based on (optimistic concurrency, as a PATCH\'s)', minimum: 1, maximum: MAX_INT4 })
  @IsDefined({ message: 'is required: the version the restore is based on' }) @IsInt() @Min(1) @Max(MAX_INT4)
  version: number;
}

const MAX_BULK_ITEMS = 1000;
const BULK_ITEMS_RULE = `must be an array of at most ${MAX_BULK_ITEMS} item bodies`;

export class BulkItemsDto {
  @ApiProperty({ enum: ['create_only', 'upsert'] })
  @IsIn(['create_only', 'upsert'])
  mode: 'create_only' | 'upsert';

  @ApiProperty({ type: [CreateItemDto], maxItems: MAX_BULK_ITEMS, description: 'Item bodies as for POST /items; each is checked on its own (a bad one is an error result, not a 400)' })
  // One message for both checks, which say it once: a missing `items` is no array, not a long one.
  @IsArray({ message: BULK_ITEMS_RULE }) @ArrayMaxSize(MAX_BULK_ITEMS, { message: BULK_ITEMS_RULE }) @Untransformed()
  items: unknown[];
}

export class MetadataPatchDto {
  @ApiPropertyOptional({ ...TAGS_DOC, description: 'Replaces the tags' } as ApiPropertyOptions)
  @IsOptionalNonNull() @IsTagList()
  tags?: string[];

  @ApiPropertyOptional({ ...TAGS_DOC, description: 'Tags to add' } as ApiPropertyOptions)
  @IsOptionalNonNull() @IsTagList()
  add_tags?: string[];

  @ApiPropertyOptional({ ...TAGS_DOC, description: 'Tags to remove' } as ApiPropertyOptions)
  @IsOptionalNonNull() @IsTagList({ named: true })
  remove_tags?: string[];

  @ApiPropertyOptional(EXT_DOC)
  @IsOptionalNonNull() @IsObjectMap('extension namespace')
  extensions?: Record<string, Record<string, unknown> | null>;
}

/** The longest `tags` query: MAX_TAGS tags of 100 characters and their commas. */
const TAGS_QUERY_MAX_LENGTH = MAX_TAGS * 101 - 1;
/** Longest `source` a selection of items takes (`GET /items`, a bulk action's filter). */
export const SOURCE_FILTER_MAX_LENGTH = 500;

/** Repeatable `edge` and `backref` clauses, each refused in parseEdgeClauses's words, whatever is wrong with it. */
const IsEdgeClauses = () =>
  ValidateBy({
    name: 'isEdgeClauses',
    validator: {
      validate: (v: unknown) => (Array.isArray(v) ? v : [v]).every(isEdgeClause),
      defaultMessage: () => EDGE_CLAUSE_RULE,
    },
  });

/** Repeatable `property` clauses, each refused in parsePropertyClauses's words, whatever is wrong with it. */
export const IsPropertyClauses = () =>
  ValidateBy({
    name: 'isPropertyClauses',
    validator: {
      validate: (v: unknown) => (Array.isArray(v) ? v : [v]).every(isPropertyClause),
      defaultMessage: () => PROPERTY_CLAUSE_RULE,
    },
  });

/** `sort`: a column or a property path, either way (listing-order.ts), refused in its words. */
const IsSort = () => ValidateBy({ name: 'isSort', validator: { validate: isSort, defaultMessage: () => SORT_RULE } });

export const PROPERTY_FILTER_DOC =
  '`<path><operator><value>`, e.g. `status=open`, `priority>=3`, `address.city!="Paris"`: items whose property at the path ' +
  '(keys joined by dots; a number indexes an array) compares so with the value (a JSON scalar, or plain text as a string). ' +
  'Operators `=` `!=` `<` `<=` `>` `>=`; `=null` also matches a missing property, `!=` too; comparisons take a number or a string ' +
  `and match properties of that JSON type (strings in code point order). Repeatable (all must hold), at most ${MAX_PROPERTY_CLAUSES}, ` +
  `each at most ${MAX_PROPERTY_CLAUSE_LENGTH} characters`;

export class ListItemsQuery {
  @ApiPropertyOptional({ description: 'Type name or pattern (`core.*`, `*`)' })
  @IsOptional() @IsString()
  type?: string;

  @ApiPropertyOptional({ enum: [...STATES, 'all'], default: 'active' })
  @IsOptional() @IsIn([...STATES, 'all'])
  state?: ItemState | 'all';

  @ApiPropertyOptional({ enum: ['library', 'feed', 'all'], default: 'all' })
  @IsOptional() @IsIn(['library', 'feed', 'all'])
  tier?: Tier | 'all';

  @ApiPropertyOptional({ description: 'Comma-separated, given once, no empty entry; items must carry all of them', maxLength: TAGS_QUERY_MAX_LENGTH })
  @IsOptional() @IsCommaList(TAGS_QUERY_MAX_LENGTH)
  tags?: string;

  @TextParam({ minLength: 1, maxLength: SOURCE_FILTER_MAX_LENGTH, description: 'Items written by the credential with this source' })
  source?: string;

  @TextParam({
    minLength: 1,
    maxLength: SOURCE_ID_MAX_LENGTH,
    description: 'The item with this `source_id`: with `source`, that source\'s; without, the caller\'s own (what `POST /items` with it would update)',
  })
  source_id?: string;

  @ApiPropertyOptional({ format: 'date-time', description: 'timestamp >= since' })
  @IsOptional() @IsRfc3339()
  since?: string;

  @ApiPropertyOptional({ format: 'date-time', description: 'timestamp < until' })
  @IsOptional() @IsRfc3339()
  until?: string;

  @ApiPropertyOptional({ format: 'date-time', description: 'updated_at >= updated_since: items changed at or after this instant (see `updated_at`)' })
  @IsOptional() @IsRfc3339()
  updated_since?: string;

  @ApiPropertyOptional({ format: 'date-time', description: 'updated_at < updated_until' })
  @IsOptional() @IsRfc3339()
  updated_until?: string;

  @ApiPropertyOptional({ description: '`<edge type>:<item id>`: items with an outgoing edge of that type to the item; repeatable', type: [String] })
  @IsOptional() @Repeatable() @IsEdgeClauses()
  edge?: string | string[];

  @ApiPropertyOptional({ description: '`<edge type>:<item id>`: items that item points to with that type; repeatable', type: [String] })
  @IsOptional() @Repeatable() @IsEdgeClauses()
  backref?: string | string[];

  @ApiPropertyOptional({ description: `${PROPERTY_FILTER_DOC}. On \`GET /items\`, a page tests at most ${PROPERTY_SCAN_ITEMS.toLocaleString("en")} items (but under a property \`sort\`, which reads them all): one that finds fewer than \`limit\` there ends early, with a \`next_cursor\` to go on`, type: [String] })
  @IsOptional() @Repeatable() @IsPropertyClauses()
  property?: string | string[];

  @ApiPropertyOptional({
    type: String,
    pattern: SORT_PATTERN,
    default: DEFAULT_SORT,
    example: '-properties.priority',
    description:
      'The order of the pages: `created_at`, `updated_at`, `timestamp`, or `properties.<path>` (a property path as `property` clauses take it), ' +
      'ascending, or descending with a leading `-`; ties by id the same way. A property compares as PostgreSQL\'s jsonb does (numbers ' +
      'numerically, strings by the database collation, across JSON types jsonb\'s order); items without it, or with null there, come last ' +
      'either way. No index serves a property order: a page sorts every item the other filters select (narrow them on a large tenant). ' +
      'A cursor pages only the order that issued it',
  })
  @IsOptional() @IsSort()
  sort?: Sort;

  @ApiPropertyOptional({ minimum: 1, maximum: 100, default: 50 })
  @IsOptional() @IsQueryInt(1, 100)
  limit?: number;

  @ApiPropertyOptional()
  @IsOptional() @IsString()
  cursor?: string;
}

export class VersionsQuery {
  @ApiPropertyOptional({ minimum: 1, maximum: 100, default: 50 })
  @IsOptional() @IsQueryInt(1, 100)
  limit?: number;

  @ApiPropertyOptional({ description: 'Only versions older than this one' })
  @IsOptional() @IsQueryInt(1, MAX_INT4)
  before?: number;
}

export class ItemResponse {
  @ApiProperty() id: string;
  @ApiProperty() type: string;
  @ApiProperty({ type: 'object', additionalProperties: true }) properties: Record<string, unknown>;
  @ApiProperty({ enum: STATES }) state: ItemState;
  @ApiInteger() version: number;
  @ApiInteger() schema_version: number;
  @ApiProperty() source: string;
  @ApiProperty({ type: String, nullable: true }) source_id: string | null;
  @ApiProperty({ format: 'date-time' }) timestamp: string;
  @ApiProperty({ format: 'date-time' }) created_at: string;
  @ApiProperty({ format: 'date-time' }) updated_at: string;
  @ApiProperty({ enum: ['library', 'feed'] }) tier: Tier;
  @ApiProperty() tenant_id: string;
  @ApiProperty({ type: String, nullable: true }) device: string | null;
  @ApiProperty({ type: Number, nullable: true }) capture_latitude: number | null;
  @ApiProperty({ type: Number, nullable: true }) capture_longitude: number | null;
  @ApiProperty({ type: 'object', additionalProperties: { type: 'array', items: { type: 'string' } }, description: 'Outgoing edges by edge type' })
  edges: Record<string, string[]>;
  @ApiProperty({ type: 'object', additionalProperties: { type: 'object' } }) extensions: Record<string, Record<string, unknown>>;
  @ApiPropertyOptional({ type: [String], description: 'Absent for OAuth tokens without metadata:read' }) tags?: string[];
}

export class ItemList {
  @ApiProperty({ type: [ItemResponse] }) items: ItemResponse[];
  @ApiProperty({ type: String, nullable: true }) next_cursor: string | null;
}

export class ItemVersion {
  @ApiInteger() version: number;
  @ApiProperty({ type: ItemResponse, description: 'The item as this revision left it; `edges` is always empty: edges are not versioned (GET /items/{id} shows them)' }) item: ItemResponse;
  @ApiProperty({ description: 'Id of the credential that made the change' }) changed_by: string;
  @ApiProperty({ format: 'date-time' }) created_at: string;
}

export class ItemVersionList {
  @ApiProperty({ type: [ItemVersion] }) versions: ItemVersion[];
  @ApiProperty({ type: 'integer', nullable: true, description: 'Pass as `before` for the next page; null on the last page' })
  next_before: number | null;
}

class BulkItemError {
  @ApiProperty() code: string;
  @ApiProperty() message: string;
  @ApiPropertyOptional({ type: 'object', additionalProperties: true }) details?: Record<string, unknown>;
}

export class BulkItemResult {
  @ApiInteger() index: number;
  @ApiProperty({ enum: ['created', 'updated', 'error'] }) status: 'created' | 'updated' | 'error';
  @ApiPropertyOptional() id?: string;
  @ApiPropertyOptional({ type: BulkItemError }) error?: BulkItemError;
}

export class BulkItemsResponse {
  @ApiProperty({ type: [BulkItemResult] }) results: BulkItemResult[];
}

export class ItemMetadata {
  @ApiProperty() item_id: string;
  @ApiPropertyOptional({ type: [String], description: 'Absent for OAuth tokens without metadata:read' }) tags?: string[];
  @ApiProperty({ type: 'object', additionalProperties: { type: 'object' } }) extensions: Record<string, Record<string, unknown>>;
}

class VersionConflictDetails {
  @ApiProperty({ type: ItemResponse, description: 'The item as it is now' }) current: ItemResponse;
  @ApiProperty({ type: ItemResponse, nullable: true, description: 'The version the change was based on (its `edges` empty: edges are not versioned); null when that version is not kept' })
  ancestor: ItemResponse | null;
  @ApiProperty({ type: [String], description: 'Fields the change touches that changed since the ancestor (`properties.title`, `tags`, ...)' })
  conflicting_fields: string[];
  @ApiProperty({ type: 'object', additionalProperties: true, description: 'The type\'s merge policy' }) merge_policy: Record<string, unknown>;
}

class VersionConflictError {
  @ApiProperty({ enum: ['version_conflict'] }) code: 'version_conflict';
  @ApiProperty() message: string;
  @ApiProperty({ type: VersionConflictDetails }) details: VersionConflictDetails;
}

/** The 409 of PATCH /items/{id}: the error envelope with typed details. */
export class VersionConflictEnvelope {
  @ApiProperty({ type: VersionConflictError }) error: VersionConflictError;
}
