import { Body, Controller, Post } from '@nestjs/common';
import { ApiCreatedResponse, ApiOperation, ApiTags } from '@nestjs/swagger';
import { Requires } from '../auth/decorators';
import { NoStore } from '../common/security-headers';
import { Idempotent } from '../idempotency/idempotent.decorator';
import { ApiErrors } from '../openapi/api-errors.decorator';
import { CreatedTenantResponse, CreateTenantDto } from './tenants.dto';
import { TenantsService } from './tenants.service';

@ApiTags('tenants')
@Controller('tenants')
export class TenantsController {
  constructor(private readonly tenants: TenantsService) {}

  @Post()
  @Requires({ admin: true, rootTenant: true })
  // The response is the only place the new admin key appears: a retry after losing it must get
  // it again, not make a second tenant and orphan the first.
  @Idempotent()
  @NoStore()
  @ApiOperation({ summary: 'Create a tenant and its first admin key (admin key of the root tenant)' })
  @ApiCreatedResponse({ type: CreatedTenantResponse })
  @ApiErrors(400, 401, 403, 409, 429)
  create(@Body() dto: CreateTenantDto): Promise<CreatedTenantResponse> {
    return this.tenants.create(dto.name);
  }
}
