import { Controller, Delete, Get, Param, Put, Query } from '@nestjs/common';
import { ApiOkResponse, ApiOperation, ApiTags } from '@nestjs/swagger';
import { Caller, Requires } from '../auth/decorators';
import type { Principal } from '../auth/principal';
import { PageQuery } from '../common/pagination';
import { ApiErrors } from '../openapi/api-errors.decorator';
import { BlockedClientsService } from './blocked-clients';
import { BlockedClient, BlockedClientList, ParseClientIdPipe } from './clients.dto';

@ApiTags('oauth')
@Controller('auth/blocked-clients')
@Requires({ admin: true })
export class BlockedClientsController {
  constructor(private readonly blocked: BlockedClientsService) {}

  @Get()
  @ApiOperation({ summary: 'The openly registered apps the tenant\'s users may not connect, newest first (admin)' })
  @ApiOkResponse({ type: BlockedClientList })
  @ApiErrors(400, 401, 403, 429)
  list(@Caller() caller: Principal, @Query() page: PageQuery): Promise<BlockedClientList> {
    return this.blocked.list(caller, page);
  }

  @Put(':client_id')
  @ApiOperation({
    summary: 'Block an openly registered app for the tenant\'s users (admin); idempotent',
    description:
      'Ends every grant the app holds from the tenant\'s users (each audited `auth.grant.revoked`, `details.by` `client_blocked`; their tokens are refused ' +
      'from the next request) and refuses their consents to it from then on. Audited `auth.client.blocked` the first time. ' +
      'The tenant\'s own clients are 409 `conflict` (change or delete them at /auth/clients); unknown ones and other tenants\' are 404 `not_found`.',
  })
  @ApiOkResponse({ type: BlockedClient })
  @ApiErrors(400, 401, 403, 404, 409, 429)
  block(@Caller() caller: Principal, @Param('client_id', ParseClientIdPipe) clientId: string): Promise<BlockedClient> {
    return this.blocked.block(caller, clientId);
  }

  @Delete(':client_id')
  @ApiOperation({ summary: 'Unblock an app: the tenant\'s users may connect it again (admin); audited `auth.client.unblocked`' })
  @ApiOkResponse({ type: BlockedClient })
  @ApiErrors(400, 401, 403, 404, 429)
  unblock(@Caller() caller: Principal, @Param('client_id', ParseClientIdPipe) clientId: string): Promise<BlockedClient> {
    return this.blocked.unblock(caller, clientId);
  }
}
