import { Body, Controller, Delete, Get, HttpCode, Param, Patch, Post, Query } from '@nestjs/common';
import { ApiOkResponse, ApiOperation, ApiTags } from '@nestjs/swagger';
import { AllowBootstrap, Caller, Requires } from '../auth/decorators';
import type { Principal } from '../auth/principal';
import { Created } from '../common/created-location';
import { ParseIdPipe } from '../common/ids';
import { NoStore } from '../common/security-headers';
import { Idempotent } from '../idempotency/idempotent.decorator';
import { ApiErrors } from '../openapi/api-errors.decorator';
import { ApiKeyList, ApiKeyResponse, CreatedApiKeyResponse, CreateKeyDto, ListKeysQuery, UpdateKeyDto } from './keys.dto';
import { KeysService } from './keys.service';

@ApiTags('keys')
@Controller('keys')
export class KeysController {
  constructor(private readonly keys: KeysService) {}

  @Post()
  @AllowBootstrap()
  @Requires({ admin: true })
  @Idempotent()
  @NoStore()
  @ApiOperation({
    summary: 'Create an API key',
    description:
      'Needs an admin key, except on a server with no keys at all: then it needs no auth, creates the root tenant and returns its first admin key (bootstrap, closed forever afterwards). The plaintext `key` appears only in this response.',
  })
  @Created({ type: CreatedApiKeyResponse, path: '/keys/{id}' })
  @ApiErrors(400, 401, 403, 409, 429)
  create(@Caller() caller: Principal | undefined, @Body() dto: CreateKeyDto): Promise<ApiKeyResponse> {
    if (!caller) return this.keys.bootstrap(dto);
    return this.keys.create(caller, dto);
  }

  @Get()
  @Requires({ admin: true })
  @ApiOperation({ summary: 'List the tenant\'s keys (admin), newest first, by status, role or last use; plaintext never included' })
  @ApiOkResponse({ type: ApiKeyList })
  @ApiErrors(400, 401, 403, 429)
  list(@Caller() caller: Principal, @Query() q: ListKeysQuery): Promise<ApiKeyList> {
    return this.keys.list(caller.tenantId, q);
  }

  @Get('current')
  @Requires({ apiKey: true })
  @ApiOperation({
    summary: 'The calling API key, any role: what it may do',
    description:
      'The key the request is made with (never its plaintext): role, `source`, `default_tier` and permission maps, so an integration can learn its ' +
      'own rights and natural-key source without an admin. Only API keys have such a record: an OAuth token gets 403 (its app learns its scope ' +
      'from the token response or introspection).',
  })
  @ApiOkResponse({ type: ApiKeyResponse })
  @ApiErrors(401, 403, 429)
  current(@Caller() caller: Principal): Promise<ApiKeyResponse> {
    return this.keys.current(caller);
  }

  @Get(':id')
  @Requires({ admin: true })
  @ApiOperation({ summary: 'Retrieve a key (admin)' })
  @ApiOkResponse({ type: ApiKeyResponse })
  @ApiErrors(400, 401, 403, 404, 429)
  get(@Caller() caller: Principal, @Param('id', ParseIdPipe) id: string): Promise<ApiKeyResponse> {
    return this.keys.get(caller.tenantId, id);
  }

  @Patch(':id')
  @Requires({ admin: true })
  @ApiOperation({
    summary: 'Update a key\'s label, role, default tier or permission maps (admin); effective on the next request',
    description: 'A permission map sent replaces the key\'s map whole, as JSON or as a merge patch alike. A PATCH that changes nothing writes nothing (`updated_at` stays).',
  })
  @ApiOkResponse({ type: ApiKeyResponse })
  @ApiErrors(400, 401, 403, 404, 409, 429)
  update(@Caller() caller: Principal, @Param('id', ParseIdPipe) id: string, @Body() dto: UpdateKeyDto): Promise<ApiKeyResponse> {
    return this.keys.update(caller, id, dto);
  }

  @Delete(':id')
  @HttpCode(200)
  @Requires({ admin: true })
  @ApiOperation({ summary: 'Revoke a key (admin); its next use gets 401. Rotation is revoke plus create.' })
  @ApiOkResponse({ type: ApiKeyResponse })
  @ApiErrors(400, 401, 403, 404, 409, 429)
  revoke(@Caller() caller: Principal, @Param('id', ParseIdPipe) id: string): Promise<ApiKeyResponse> {
    return this.keys.revoke(caller, id);
  }
}
