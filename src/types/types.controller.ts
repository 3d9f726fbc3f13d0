import { Body, Controller, Delete, Get, HttpCode, Param, Patch, Post, Query } from '@nestjs/common';
import { ApiOkResponse, ApiOperation, ApiTags } from '@nestjs/swagger';
import { Caller, Requires } from '../auth/decorators';
import type { Principal } from '../auth/principal';
import { Created } from '../common/created-location';
import { Idempotent } from '../idempotency/idempotent.decorator';
import { ApiErrors } from '../openapi/api-errors.decorator';
import { ApiOAuth } from '../openapi/api-oauth.decorator';
import { CreateTypeDto, ListTypesQuery, TypeList, TypeResponse, UpdateTypeDto } from './types.dto';
import { SCHEMA_CHECK_MAX_ITEMS } from './schema-change-check';
import { TypesService } from './types.service';

const TYPE_WRITE = { scope: 'metadata.types:write' } as const;

@ApiTags('types')
@Controller('types')
export class TypesController {
  constructor(private readonly types: TypesService) {}

  @Post()
  @ApiOAuth({ scopes: ['<type>:read'], note: '`<type>` matching the name it creates (a member cannot create a type it could not read); a `parent` must be readable too.' })
  @Requires(TYPE_WRITE)
  @Idempotent()
  @ApiOperation({ summary: 'Create a tenant type (admin key or OAuth scope metadata.types:write)' })
  @Created({ type: TypeResponse, path: '/types/{name}' })
  @ApiErrors(400, 401, 403, 404, 409, 429)
  create(@Caller() caller: Principal, @Body() dto: CreateTypeDto): Promise<TypeResponse> {
    return this.types.create(caller, dto);
  }

  @Get()
  @ApiOAuth({ note: 'lists the core types and those the token may read (`<type>:read`).' })
  @ApiOperation({ summary: 'List the core types and the tenant\'s own types that the caller may read: core types first, then by name' })
  @ApiOkResponse({ type: TypeList })
  @ApiErrors(400, 401, 429)
  list(@Caller() caller: Principal, @Query() q: ListTypesQuery): Promise<TypeList> {
    return this.types.list(caller, q);
  }

  @Get(':name')
  @ApiOAuth({ scopes: ['<type>:read'], note: '`<type>` matching the type.' })
  @ApiOperation({ summary: 'Retrieve a type' })
  @ApiOkResponse({ type: TypeResponse })
  @ApiErrors(400, 401, 404, 429)
  get(@Caller() caller: Principal, @Param('name') name: string): Promise<TypeResponse> {
    return this.types.get(caller, name);
  }

  @Patch(':name')
  @ApiOAuth({ scopes: ['<type>:read'], note: '`<type>` matching the type.' })
  @Requires(TYPE_WRITE)
  @ApiOperation({
    summary: 'Change a tenant type\'s schema or merge policy',
    description:
      'With items or subtypes, a new schema is taken only when every existing item (subtypes\' included, each against its own resolved schema) ' +
      'still fits it: proven from the schemas (a widening, or a property added under a key no item holds) or checked item by item, ' +
      `at most ${SCHEMA_CHECK_MAX_ITEMS} items. Otherwise 409 \`type_in_use\` with \`details.reason\`: \`items_invalid\` ` +
      '(`details.invalid_items`: up to 10 `{id, type, fields}`), `too_many_items` or `subtype_conflict` (`details.subtype`). ' +
      'The type and each changed subtype get a new `version`; items keep their `schema_version`. The merge policy changes freely.',
  })
  @ApiOkResponse({ type: TypeResponse })
  @ApiErrors(400, 401, 403, 404, 409, 429)
  update(@Caller() caller: Principal, @Param('name') name: string, @Body() dto: UpdateTypeDto): Promise<TypeResponse> {
    return this.types.update(caller, name, dto);
  }

  @Delete(':name')
  @ApiOAuth({ scopes: ['<type>:read'], note: '`<type>` matching the type.' })
  @HttpCode(200)
  @Requires(TYPE_WRITE)
  @ApiOperation({ summary: 'Delete a tenant type; only while it has no items and no subtypes' })
  @ApiOkResponse({ type: TypeResponse })
  @ApiErrors(400, 401, 403, 404, 409, 429)
  remove(@Caller() caller: Principal, @Param('name') name: string): Promise<TypeResponse> {
    return this.types.remove(caller, name);
  }
}
