import { Body, Controller, Delete, Get, HttpCode, Param, Post, Query } from '@nestjs/common';
import { ApiAcceptedResponse, ApiOkResponse, ApiOperation, ApiTags } from '@nestjs/swagger';
import { Caller, Requires } from '../auth/decorators';
import type { Principal } from '../auth/principal';
import { Created } from '../common/created-location';
import { ParseIdPipe } from '../common/ids';
import { PageQuery } from '../common/pagination';
import { NoStore } from '../common/security-headers';
import { Idempotent } from '../idempotency/idempotent.decorator';
import { ApiErrors } from '../openapi/api-errors.decorator';
import { CreatedTenantResponse, CreateTenantDto, DeletedTenantResponse, TenantList, TenantResponse } from './tenants.dto';
import { TenantsService } from './tenants.service';

/** Tenants are managed by the credential that may make them: an admin key of the root tenant. */
const ROOT_ADMIN = { admin: true, rootTenant: true } as const;

@ApiTags('tenants')
@Controller('tenants')
export class TenantsController {
  constructor(private readonly tenants: TenantsService) {}

  @Post()
  @Requires(ROOT_ADMIN)
  // The response is the only place the new admin key appears: a retry after losing it must get
  // it again, not make a second tenant and orphan the first.
  @Idempotent()
  @NoStore()
  @ApiOperation({ summary: 'Create a tenant and its first admin key (admin key of the root tenant)' })
  @Created<CreatedTenantResponse>({ type: CreatedTenantResponse, path: '/tenants/{id}', fields: (body) => body.tenant })
  @ApiErrors(400, 401, 403, 409, 429)
  create(@Caller() caller: Principal, @Body() dto: CreateTenantDto): Promise<CreatedTenantResponse> {
    return this.tenants.create(caller, dto.name);
  }

  @Get()
  @Requires(ROOT_ADMIN)
  @ApiOperation({ summary: 'Every tenant, the root tenant included, newest first, with cursor pagination (admin key of the root tenant)' })
  @ApiOkResponse({ type: TenantList })
  @ApiErrors(400, 401, 403, 429)
  list(@Query() page: PageQuery): Promise<TenantList> {
    return this.tenants.list(page);
  }

  @Get(':id')
  @Requires(ROOT_ADMIN)
  @ApiOperation({ summary: 'One tenant (admin key of the root tenant); 404 `not_found` for an unknown id' })
  @ApiOkResponse({ type: TenantResponse })
  @ApiErrors(400, 401, 403, 404, 429)
  get(@Param('id', ParseIdPipe) id: string): Promise<TenantResponse> {
    return this.tenants.get(id);
  }

  @Delete(':id')
  @Requires(ROOT_ADMIN)
  @HttpCode(202)
  @ApiOperation({
    summary: 'Delete a tenant other than the root one (admin key of the root tenant)',
    description:
      'Ends the tenant at once: its API keys are refused, its users and OAuth clients are deleted with their grants, tokens and sessions, ' +
      'its webhooks receive nothing more, its bulk jobs fail and its event streams close, from the next request on every instance. ' +
      'Its data (items, types, edges, blobs, events, webhooks, jobs, keys, audit log) is then purged in the background. ' +
      'Audited `tenant.deleted` in the root tenant\'s log. 404 `not_found` for an unknown or already deleted tenant; 409 `conflict` for the root tenant.',
  })
  @ApiAcceptedResponse({ type: DeletedTenantResponse })
  @ApiErrors(400, 401, 403, 404, 409, 429)
  remove(@Caller() caller: Principal, @Param('id', ParseIdPipe) id: string): Promise<DeletedTenantResponse> {
    return this.tenants.remove(caller, id);
  }
}
