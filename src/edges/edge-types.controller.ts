import { Body, Controller, Delete, Get, HttpCode, Param, Post, Query } from '@nestjs/common';
import { ApiOkResponse, ApiOperation, ApiTags } from '@nestjs/swagger';
import { Caller, Requires } from '../auth/decorators';
import type { Principal } from '../auth/principal';
import { Created } from '../common/created-location';
import { PageQuery } from '../common/pagination';
import { Idempotent } from '../idempotency/idempotent.decorator';
import { ApiErrors } from '../openapi/api-errors.decorator';
import { ApiOAuth } from '../openapi/api-oauth.decorator';
import { CreateEdgeTypeDto, EdgeTypeList, EdgeTypeResponse } from './edges.dto';
import { EdgeTypesService } from './edge-types.service';

@ApiTags('edges')
@Controller('edge-types')
export class EdgeTypesController {
  constructor(private readonly edgeTypes: EdgeTypesService) {}

  @Post()
  @Requires({ admin: true })
  @Idempotent()
  @ApiOperation({
    summary: 'Define an edge type (admin)',
    description:
      'Names which item types may be linked (`source_types`, `target_types`: type patterns such as `core.note`, `core.*`, `*`), ' +
      'whether an item may have `one` or `many` outgoing edges of the type, and whether cycles are refused (`acyclic`). ' +
      'A taken name is 409 `conflict`.',
  })
  @Created({ type: EdgeTypeResponse, path: '/edge-types/{name}' })
  @ApiErrors(400, 401, 403, 409, 429)
  create(@Caller() caller: Principal, @Body() dto: CreateEdgeTypeDto): Promise<EdgeTypeResponse> {
    return this.edgeTypes.create(caller, dto);
  }

  @Get()
  @ApiOAuth({ note: 'lists the edge types the token may read (`edge.<type>:read`).' })
  @ApiOperation({ summary: 'List the edge types the caller may read, by name' })
  @ApiOkResponse({ type: EdgeTypeList })
  @ApiErrors(400, 401, 429)
  list(@Caller() caller: Principal, @Query() page: PageQuery): Promise<EdgeTypeList> {
    return this.edgeTypes.list(caller, page);
  }

  @Get(':name')
  @ApiOAuth({ scopes: ['edge.<type>:read'], note: '`edge.<type>` of the edge type.' })
  @ApiOperation({ summary: 'Retrieve an edge type; 404 edge_type_not_found when missing or not readable' })
  @ApiOkResponse({ type: EdgeTypeResponse })
  @ApiErrors(400, 401, 404, 429)
  get(@Caller() caller: Principal, @Param('name') name: string): Promise<EdgeTypeResponse> {
    return this.edgeTypes.get(caller, name);
  }

  @Delete(':name')
  @HttpCode(200)
  @Requires({ admin: true })
  @ApiOperation({ summary: 'Delete an edge type that has no edges (admin); 409 conflict while edges of it exist' })
  @ApiOkResponse({ type: EdgeTypeResponse })
  @ApiErrors(400, 401, 403, 404, 409, 429)
  remove(@Caller() caller: Principal, @Param('name') name: string): Promise<EdgeTypeResponse> {
    return this.edgeTypes.remove(caller, name);
  }
}
