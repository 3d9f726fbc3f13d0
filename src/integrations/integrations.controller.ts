import { Body, Controller, Get, Param, Post, Query } from '@nestjs/common';
import { ApiOkResponse, ApiOperation, ApiTags } from '@nestjs/swagger';
import { Caller, Requires } from '../auth/decorators';
import type { Principal } from '../auth/principal';
import { Created } from '../common/created-location';
import { Idempotent } from '../idempotency/idempotent.decorator';
import { ApiErrors } from '../openapi/api-errors.decorator';
import { ApiOAuth } from '../openapi/api-oauth.decorator';
import { IntegrationList, IntegrationRecord, ListIntegrationsQuery, RegisterIntegrationDto } from './integrations.dto';
import { IntegrationsService } from './integrations.service';

@ApiTags('integrations')
@Controller('integrations')
export class IntegrationsController {
  constructor(private readonly integrations: IntegrationsService) {}

  @Post()
  @Requires({ admin: true, rootTenant: true })
  @Idempotent()
  @ApiOperation({
    summary: 'Register an integration manifest (admin key of the root tenant)',
    description: 'A new version of a name is a new record; the same name and version twice is 409 conflict. Each bad manifest field is named in details.fields.',
  })
  @Created({ type: IntegrationRecord, path: '/integrations/{id}' })
  @ApiErrors(400, 401, 403, 409, 429)
  register(@Caller() caller: Principal, @Body() dto: RegisterIntegrationDto): Promise<IntegrationRecord> {
    return this.integrations.register(caller, dto.manifest);
  }

  @Get()
  @ApiOAuth({ note: 'any token of the tenant.' })
  @ApiOperation({ summary: 'Registered integrations, newest first; query `name` for every version of one' })
  @ApiOkResponse({ type: IntegrationList })
  @ApiErrors(400, 401, 429)
  list(@Query() q: ListIntegrationsQuery): Promise<IntegrationList> {
    return this.integrations.list(q);
  }

  @Get(':id')
  @ApiOAuth({ note: 'any token of the tenant.' })
  @ApiOperation({ summary: 'One integration with its full manifest, for install-time consent' })
  @ApiOkResponse({ type: IntegrationRecord })
  @ApiErrors(400, 401, 404, 429)
  get(@Param('id') id: string): Promise<IntegrationRecord> {
    return this.integrations.get(id);
  }
}
