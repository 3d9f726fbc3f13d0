import { Body, Controller, Delete, Get, HttpCode, Param, Patch, Post, Query, Res } from '@nestjs/common';
import { ApiConflictResponse, ApiOkResponse, ApiOperation, ApiTags } from '@nestjs/swagger';
import type { FastifyReply } from 'fastify';
import { Caller } from '../auth/decorators';
import type { Principal } from '../auth/principal';
import { PerElementBody } from '../common/body-parsing';
import { Created } from '../common/created-location';
import { ParseIdPipe } from '../common/ids';
import { MAX_INT4, ParseIntParam } from '../common/validation';
import { Idempotent } from '../idempotency/idempotent.decorator';
import { ApiErrors } from '../openapi/api-errors.decorator';
import { ApiOAuth } from '../openapi/api-oauth.decorator';
import {
  BulkItemsDto, BulkItemsResponse, CreateItemDto, ItemList, ItemMetadata, ItemResponse, ItemVersion, ItemVersionList, ListItemsQuery,
  MetadataPatchDto, PatchItemDto, RestoreItemDto, VersionConflictEnvelope, VersionsQuery,
} from './items.dto';
import type { Item } from './item.model';
import { ItemsService } from './items.service';

@ApiTags('items')
@Controller('items')
export class ItemsController {
  constructor(private readonly items: ItemsService) {}

  @Post()
  @Idempotent()
  @ApiOperation({
    summary: 'Create an item, or update it through its natural key',
    description:
      '201 when created. When `source_id` is given and this credential\'s source already has an item with it, that item is updated (properties and given fields replaced) and the response is 200. `source` is stamped from the credential; a client-sent one is ignored. `edges` naming an unknown edge type or an item the caller cannot see: 404 edge_type_not_found or item_not_found.',
  })
  @ApiOAuth({ scopes: ['<type>:write'], note: '`<type>` matching the item\'s type; `tags` need `metadata:write`, an extension namespace write in the client\'s extension grant; `edges` need `edge.<edge type>:write`.' })
  @Created({ type: ItemResponse, path: '/items/{id}' })
  @ApiOkResponse({ type: ItemResponse, description: 'Updated through the natural key' })
  @ApiErrors(400, 401, 403, 404, 409, 429)
  async create(@Caller() caller: Principal, @Body() dto: CreateItemDto, @Res({ passthrough: true }) res: FastifyReply): Promise<Item> {
    const { item, created } = await this.items.create(caller, dto);
    res.status(created ? 201 : 200);
    return item;
  }

  @Post('bulk')
  @HttpCode(200)
  @Idempotent()
  @PerElementBody('items')
  @ApiOperation({ summary: 'Write up to 1000 items; one result per item (`create_only` reports taken natural keys as duplicate_source)' })
  @ApiOAuth({ note: 'each item needs what POST /items needs (`<type>:write` on its type, ...); one that lacks it is an error result.' })
  @ApiOkResponse({ type: BulkItemsResponse })
  @ApiErrors(400, 401, 409, 429)
  bulk(@Caller() caller: Principal, @Body() dto: BulkItemsDto): Promise<BulkItemsResponse> {
    return this.items.bulk(caller, dto);
  }

  @Get()
  @ApiOperation({
    summary: 'List items with filters and cursor pagination: newest first unless `sort` says otherwise (default state active, all tiers)',
    description:
      '`sort` orders by `created_at`, `updated_at` or the item `timestamp`, ascending or (`-`) descending, ties by id; `updated_since`/`updated_until` ' +
      'select by last change (`updated_at`), as `since`/`until` do by `timestamp`. A `next_cursor` pages only the `sort` it was issued under ' +
      '(another is 400 validation_error naming `cursor`).',
  })
  @ApiOAuth({ note: 'lists items of the types the token may read (`<type>:read`); without `metadata:read` items come without `tags` and a `tags` filter is 403.' })
  @ApiOkResponse({ type: ItemList })
  @ApiErrors(400, 401, 403, 429)
  list(@Caller() caller: Principal, @Query() q: ListItemsQuery): Promise<ItemList> {
    return this.items.list(caller, q);
  }

  @Get(':id')
  @ApiOperation({ summary: 'Retrieve an item (404 also when its type is not readable by the caller)' })
  @ApiOAuth({ scopes: ['<type>:read'], note: '`<type>` matching the item\'s type; `tags` come with `metadata:read`.' })
  @ApiOkResponse({ type: ItemResponse })
  @ApiErrors(400, 401, 404, 429)
  get(@Caller() caller: Principal, @Param('id', ParseIdPipe) id: string): Promise<Item> {
    return this.items.get(caller, id);
  }

  @Patch(':id')
  @ApiOperation({
    summary: 'Change an item (optimistic concurrency on `version`)',
    description:
      '`properties` and `extensions` merge shallowly (null removes a key). A stale `version` is 409 version_conflict with {current, ancestor, conflicting_fields, merge_policy}, except when only tags, tier or state change: the server merges those (tags as adds/removes relative to the ancestor). A patch that changes nothing answers the item as it is, without a new version.',
  })
  @ApiOAuth({ scopes: ['<type>:write'], note: '`<type>` matching the item\'s type; `tags` need `metadata:write`, an extension namespace write in the client\'s extension grant.' })
  @ApiOkResponse({ type: ItemResponse })
  @ApiConflictResponse({ type: VersionConflictEnvelope, description: 'version_conflict: the item changed since `version`' })
  @ApiErrors(400, 401, 403, 404, 429)
  patch(@Caller() caller: Principal, @Param('id', ParseIdPipe) id: string, @Body() dto: PatchItemDto): Promise<Item> {
    return this.items.patch(caller, id, dto);
  }

  @Delete(':id')
  @HttpCode(200)
  @ApiOperation({ summary: 'Move an item to the trash' })
  @ApiOAuth({ scopes: ['<type>:write'], note: '`<type>` matching the item\'s type.' })
  @ApiOkResponse({ type: ItemResponse })
  @ApiErrors(400, 401, 403, 404, 429)
  trash(@Caller() caller: Principal, @Param('id', ParseIdPipe) id: string): Promise<Item> {
    return this.items.trash(caller, id);
  }

  @Get(':id/versions')
  @ApiOperation({ summary: 'Revision history, newest first' })
  @ApiOAuth({ scopes: ['<type>:read'], note: '`<type>` matching the item\'s type.' })
  @ApiOkResponse({ type: ItemVersionList })
  @ApiErrors(400, 401, 404, 429)
  versions(@Caller() caller: Principal, @Param('id', ParseIdPipe) id: string, @Query() q: VersionsQuery): Promise<ItemVersionList> {
    return this.items.versions(caller, id, q);
  }

  @Get(':id/versions/:version')
  @ApiOperation({
    summary: 'One revision of an item',
    description: '404 item_not_found when the item is missing or invisible; 404 not_found when it has no such version (or a purge removed its history with it).',
  })
  @ApiOAuth({ scopes: ['<type>:read'], note: '`<type>` matching the item\'s type.' })
  @ApiOkResponse({ type: ItemVersion })
  @ApiErrors(400, 401, 404, 429)
  version(
    @Caller() caller: Principal,
    @Param('id', ParseIdPipe) id: string,
    @Param('version', ParseIntParam(1, MAX_INT4)) version: number,
  ): Promise<ItemVersion> {
    return this.items.version(caller, id, version);
  }

  @Post(':id/versions/:version/restore')
  @HttpCode(200)
  @Idempotent()
  @ApiOperation({
    summary: 'Restore an item to one of its revisions',
    description:
      'The PATCH, based on the body\'s `version`, that takes the item back to what revision `{version}` held: its properties, tags, tier, ' +
      'timestamp, device, capture place and the extension namespaces the caller may write (tags with `metadata:write`). Not its state, nor ' +
      'edges. It makes a new version (a restore to what the item already holds changes nothing) and is checked, merged and announced as that ' +
      'PATCH: 409 version_conflict for a stale `version`, 400 invalid_properties when the revision\'s properties do not fit the type\'s ' +
      'schema now, 403 without write on the type. 404 not_found for a version the item does not have.',
  })
  @ApiOAuth({ scopes: ['<type>:write'], note: '`<type>` matching the item\'s type; tags with `metadata:write`.' })
  @ApiOkResponse({ type: ItemResponse })
  @ApiConflictResponse({ type: VersionConflictEnvelope, description: 'version_conflict, as a PATCH\'s' })
  @ApiErrors(400, 401, 403, 404, 429)
  restore(
    @Caller() caller: Principal,
    @Param('id', ParseIdPipe) id: string,
    @Param('version', ParseIntParam(1, MAX_INT4)) version: number,
    @Body() dto: RestoreItemDto,
  ): Promise<Item> {
    return this.items.restore(caller, id, version, dto);
  }

  @Get(':id/metadata')
  @ApiOperation({ summary: 'Tags and readable extensions of an item' })
  @ApiOAuth({ scopes: ['<type>:read'], note: '`<type>` matching the item\'s type; `tags` come with `metadata:read`.' })
  @ApiOkResponse({ type: ItemMetadata })
  @ApiErrors(400, 401, 403, 404, 429)
  metadata(@Caller() caller: Principal, @Param('id', ParseIdPipe) id: string): Promise<ItemMetadata> {
    return this.items.metadata(caller, id);
  }

  @Patch(':id/metadata')
  @ApiOperation({ summary: 'Change tags (replace, add, remove) and extension namespaces without a version check' })
  @ApiOAuth({ scopes: ['<type>:write'], note: '`<type>` matching the item\'s type; `tags` need `metadata:write`, an extension namespace write in the client\'s extension grant.' })
  @ApiOkResponse({ type: ItemMetadata })
  @ApiErrors(400, 401, 403, 404, 429)
  patchMetadata(@Caller() caller: Principal, @Param('id', ParseIdPipe) id: string, @Body() dto: MetadataPatchDto): Promise<ItemMetadata> {
    return this.items.patchMetadata(caller, id, dto);
  }
}
