/**
 * A tenant's admins over its users' OAuth grants (`/users/{id}/grants`): which apps each user
 * connected, with what scopes, and revoking one, as the user can on the account pages (a lost
 * laptop, an app the team no longer trusts, someone leaving). The revocation is the user's own
 * (GrantsService.revoke), audited `auth.grant.revoked` with `details.by` `admin` and the actor.
 */
import { Controller, Delete, Get, Param, Query } from '@nestjs/common';
import { ApiOkResponse, ApiOperation, ApiTags } from '@nestjs/swagger';
import { Caller, Requires } from '../auth/decorators';
import type { Principal } from '../auth/principal';
import { actorOf } from '../audit/audit.service';
import { ApiError } from '../common/api-error';
import { ParseIdPipe } from '../common/ids';
import { PageQuery } from '../common/pagination';
import { ApiErrors } from '../openapi/api-errors.decorator';
import { UsersService } from '../users/users.service';
import { AccountGrant, AccountGrantList } from './account.dto';
import { ParseProviderIdPipe } from './clients.dto';
import { GrantsService } from './grants.service';

const noSuchGrant = () => ApiError.notFound('not_found', 'No such grant of this user');

@ApiTags('users')
@Controller('users/:id/grants')
@Requires({ admin: true })
export class UserGrantsController {
  constructor(
    private readonly users: UsersService,
    private readonly grants: GrantsService,
  ) {}

  @Get()
  @ApiOperation({ summary: 'The apps a user of the tenant connected, newest first, with the scopes each holds (admin); paged' })
  @ApiOkResponse({ type: AccountGrantList })
  @ApiErrors(400, 401, 403, 404, 429)
  async list(@Caller() caller: Principal, @Param('id', ParseIdPipe) userId: string, @Query() query: PageQuery): Promise<AccountGrantList> {
    const user = await this.users.get(caller, userId);
    return this.grants.page(user.id, query.limit, query.cursor);
  }

  @Get(':grant_id')
  @ApiOperation({ summary: 'One grant of a user of the tenant (admin)' })
  @ApiOkResponse({ type: AccountGrant })
  @ApiErrors(400, 401, 403, 404, 429)
  async get(@Caller() caller: Principal, @Param('id', ParseIdPipe) userId: string, @Param('grant_id', new ParseProviderIdPipe('grant')) grantId: string): Promise<AccountGrant> {
    const user = await this.users.get(caller, userId);
    const grant = await this.grants.get(user.id, grantId);
    if (!grant) throw noSuchGrant();
    return grant;
  }

  @Delete(':grant_id')
  @ApiOperation({
    summary: 'Revoke a grant of a user of the tenant (admin): its access and refresh tokens stop working at once',
    description: 'Audited `auth.grant.revoked` with `details.by` `admin` and `details.actor`. The user can connect the app again.',
  })
  @ApiOkResponse({ type: AccountGrant, description: 'The grant revoked' })
  @ApiErrors(400, 401, 403, 404, 429)
  async revoke(@Caller() caller: Principal, @Param('id', ParseIdPipe) userId: string, @Param('grant_id', new ParseProviderIdPipe('grant')) grantId: string): Promise<AccountGrant> {
    const user = await this.users.get(caller, userId);
    const revoked = await this.grants.revoke(user, grantId, 'admin', actorOf(caller));
    if (!revoked) throw noSuchGrant();
    return revoked;
  }
}
