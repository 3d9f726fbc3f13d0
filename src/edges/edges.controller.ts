import { Body, Controller, Delete, Get, HttpCode, Param, Post, Query } from '@nestjs/common';
import { ApiOkResponse, ApiOperation, ApiTags } from '@nestjs/swagger';
import { Caller } from '../auth/decorators';
import type { Principal } from '../auth/principal';
import { Created } from '../common/created-location';
import { ParseIdPipe } from '../common/ids';
import { Idempotent } from '../idempotency/idempotent.decorator';
import { ApiErrors } from '../openapi/api-errors.decorator';
import { ApiOAuth } from '../openapi/api-oauth.decorator';
import { CreateEdgeDto, EdgeList, EdgeResponse, EdgesQuery, ItemEdgesQuery } from './edges.dto';
import { EdgesService } from './edges.service';

/**
 * `/edges` and `/items/{id}/edges`. The latter lives here rather than in the items controller
 * because it is an edge listing; its three-segment path cannot collide with `/items/{id}`.
 */
@ApiTags('edges')
@Controller()
export class EdgesController {
  constructor(private readonly edges: EdgesService) {}

  @Post('edges')
  @Idempotent()
  @ApiOAuth({ scopes: ['edge.<type>:write', '<type>:write'], note: '`edge.<type>` of the edge type, `<type>` matching the source item\'s type.' })
  @ApiOperation({
    summary: 'Link two items',
    description:
      'Needs write on the edge type and write on the source item\'s type (else 403 edge_permission_denied), and read on the target\'s type ' +
      '(else 404 item_not_found). 404 edge_type_not_found for an unknown type. 400 edge_constraint_violation with `details.reason` ' +
      '`type` (an item\'s type is outside the edge type\'s patterns), `cardinality` (a `one` type and the source already has an outgoing edge ' +
      'of it), `duplicate` (the same type, source and target exist; `details.existing_edge_id`) or `limit` (the source would have more than ' +
      '1,000 outgoing edges, all types together). 400 edge_cycle when the type is acyclic ' +
      'and the edge would close a cycle, self-loops included.',
  })
  @Created({ type: EdgeResponse, path: '/edges/{id}' })
  @ApiErrors(400, 401, 403, 404, 429)
  create(@Caller() caller: Principal, @Body() dto: CreateEdgeDto): Promise<EdgeResponse> {
    return this.edges.create(caller, dto);
  }

  @Get('edges')
  @ApiOAuth({ scopes: ['edge.<type>:read', '<type>:read'], note: 'lists the edges of the edge types (`edge.<type>:read`) between items of types the token may read.' })
  @ApiOperation({
    summary: 'List the tenant\'s edges, newest first',
    description:
      '`type` narrows to an edge type name or pattern; `since` (inclusive) and `until` (exclusive) to a window of `created_at`. Only edges ' +
      'of types the caller may read whose two items it can see are listed. Deleted edges leave no row (see the `edge.deleted` event).',
  })
  @ApiOkResponse({ type: EdgeList })
  @ApiErrors(400, 401, 429)
  list(@Caller() caller: Principal, @Query() q: EdgesQuery): Promise<EdgeList> {
    return this.edges.list(caller, q);
  }

  @Get('edges/:id')
  @ApiOAuth({ scopes: ['edge.<type>:read', '<type>:read'], note: '`edge.<type>` of the edge type, `<type>` matching the types of both items.' })
  @ApiOperation({ summary: 'Retrieve an edge; 404 edge_not_found unless the caller may read the edge type and both items' })
  @ApiOkResponse({ type: EdgeResponse })
  @ApiErrors(400, 401, 404, 429)
  get(@Caller() caller: Principal, @Param('id', ParseIdPipe) id: string): Promise<EdgeResponse> {
    return this.edges.get(caller, id);
  }

  @Delete('edges/:id')
  @ApiOAuth({ scopes: ['edge.<type>:write', '<type>:write'], note: '`edge.<type>` of the edge type, `<type>` matching the source item\'s type.' })
  @HttpCode(200)
  @ApiOperation({ summary: 'Delete an edge (same dual permission gate as creation); returns the deleted edge' })
  @ApiOkResponse({ type: EdgeResponse })
  @ApiErrors(400, 401, 403, 404, 429)
  remove(@Caller() caller: Principal, @Param('id', ParseIdPipe) id: string): Promise<EdgeResponse> {
    return this.edges.remove(caller, id);
  }

  @Get('items/:id/edges')
  @ApiOAuth({ scopes: ['<type>:read'], note: '`<type>` matching the item\'s type; lists the edges of the edge types (`edge.<type>:read`) and to the items the token may read.' })
  @ApiOperation({
    summary: 'List an item\'s edges, newest first',
    description:
      '`direction`: `outgoing` (the item is the source), `incoming` (the item is the target) or `both` (default). `type` narrows to an edge ' +
      'type name or pattern. Only edges of types the caller may read whose other item it can see are listed. 404 item_not_found when the ' +
      'item is missing or invisible.',
  })
  @ApiOkResponse({ type: EdgeList })
  @ApiErrors(400, 401, 404, 429)
  listForItem(@Caller() caller: Principal, @Param('id', ParseIdPipe) id: string, @Query() q: ItemEdgesQuery): Promise<EdgeList> {
    return this.edges.listForItem(caller, id, q);
  }
}
