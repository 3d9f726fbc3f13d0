import { Controller, Get, Query } from '@nestjs/common';
import { ApiOkResponse, ApiOperation, ApiTags } from '@nestjs/swagger';
import { Caller, Requires } from '../auth/decorators';
import type { Principal } from '../auth/principal';
import { ApiErrors } from '../openapi/api-errors.decorator';
import { AuditList, ListAuditQuery } from './audit.dto';
import { AuditService } from './audit.service';

@ApiTags('audit')
@Controller('audit')
export class AuditController {
  constructor(private readonly audit: AuditService) {}

  @Get()
  @Requires({ admin: true })
  @ApiOperation({
    summary: 'The tenant\'s audit events, newest first (admin)',
    description:
      'Grants given and revoked, and changes of the tenant\'s credentials: API keys, OAuth clients, webhooks, the tenant\'s creation. ' +
      'Each change\'s row is written with it, names who made it (`details.actor`), and never holds a secret. `action` lists one action\'s.',
  })
  @ApiOkResponse({ type: AuditList })
  @ApiErrors(400, 401, 403, 429)
  list(@Caller() caller: Principal, @Query() q: ListAuditQuery): Promise<AuditList> {
    return this.audit.list(caller, q);
  }
}
