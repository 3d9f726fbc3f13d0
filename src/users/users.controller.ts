import { Body, Controller, Delete, Get, HttpCode, Param, Patch, Post, Query } from '@nestjs/common';
import { ApiOkResponse, ApiOperation, ApiTags } from '@nestjs/swagger';
import { Caller, Requires } from '../auth/decorators';
import type { Principal } from '../auth/principal';
import { Created } from '../common/created-location';
import { ParseIdPipe } from '../common/ids';
import { Idempotent } from '../idempotency/idempotent.decorator';
import { ApiErrors } from '../openapi/api-errors.decorator';
import { CreateUserDto, ListUsersQuery, MAX_DISABLED_DAYS, UpdateUserDto, UserList, UserResponse } from './users.dto';
import { UsersService } from './users.service';

@ApiTags('users')
@Controller('users')
@Requires({ admin: true })
export class UsersController {
  constructor(private readonly users: UsersService) {}

  @Post()
  @Idempotent()
  @ApiOperation({ summary: 'Create a user of the caller\'s tenant, who can sign in to the OAuth provider (admin)' })
  @Created({ type: UserResponse, path: '/users/{id}' })
  @ApiErrors(400, 401, 403, 409, 429)
  create(@Caller() caller: Principal, @Body() dto: CreateUserDto): Promise<UserResponse> {
    return this.users.create(caller, dto);
  }

  @Get()
  @ApiOperation({ summary: 'The tenant\'s users, newest first, with cursor pagination (admin); `email` finds one, `disabled` keeps the disabled (true) or enabled (false) ones' })
  @ApiOkResponse({ type: UserList })
  @ApiErrors(400, 401, 403, 429)
  list(@Caller() caller: Principal, @Query() q: ListUsersQuery): Promise<UserList> {
    return this.users.list(caller, q);
  }

  @Get(':id')
  @ApiOperation({ summary: 'One user (admin)' })
  @ApiOkResponse({ type: UserResponse })
  @ApiErrors(400, 401, 403, 404, 429)
  get(@Caller() caller: Principal, @Param('id', ParseIdPipe) id: string): Promise<UserResponse> {
    return this.users.get(caller, id);
  }

  @Patch(':id')
  @ApiOperation({
    summary: 'Change a user\'s name, role, password, picture, email_verified, or disable them (for a while, or until enabled) or enable them (admin)',
    description:
      'Absent fields stay as they are; `"picture": null` removes the picture. A new password or a demotion to `member` ends the user\'s sign-ins (the account pages\' and the sessions apps use), as signing out everywhere does; a demotion also revokes the API keys the user made on the account pages (409 `conflict` if that would leave the tenant no active admin key, or if the calling key is one of them, `details.field` `role`: a user cannot demote themselves). A role change holds for the user\'s OAuth tokens from the next request; their grants stay. ' +
      '`"disabled": true` suspends the user without deleting them: their sign-in is refused as a wrong password is (the page does not tell that the password was right), and, as a deletion does, it ends their sign-ins and their grants with every access and refresh token (each audited `auth.grant.revoked`, `details.by` `user_disabled`), and revokes the API keys they made on the account pages (409 `conflict` if that would leave the tenant no active admin key, or if the calling key is one of them, `details.field` `disabled`: a user cannot disable themselves). `disabled_reason` (with `"disabled": true`, or alone on a disabled user; `null` removes it) says why, for the tenant\'s admins only; 400 `validation_error` for a user left enabled. `disabled_until` (likewise) ends the disablement by itself at that instant, judged by the database\'s clock: from then on the user is enabled (they sign in; `disabled` reads false, `disabled_until` and `disabled_reason` null), with nobody acting and no audit row; it must be in the future and at most ' +
      MAX_DISABLED_DAYS +
      ' days ahead (400 `validation_error`), and `null` removes it (the disablement then lasts until an admin enables the user). `"disabled": false` lets them sign in again and clears the reason and the end; what disabling ended stays ended. Audited `user.updated` with `disabled` in `details.changed` (and `grants_revoked`, `keys_revoked` when disabling).',
  })
  @ApiOkResponse({ type: UserResponse })
  @ApiErrors(400, 401, 403, 404, 409, 429)
  update(@Caller() caller: Principal, @Param('id', ParseIdPipe) id: string, @Body() dto: UpdateUserDto): Promise<UserResponse> {
    return this.users.update(caller, id, dto);
  }

  @Delete(':id')
  @HttpCode(200)
  @ApiOperation({
    summary: 'Delete a user (admin)',
    description:
      'Ends the user\'s grants, tokens and sessions, and revokes the API keys they made on the account pages (409 `conflict`, nothing deleted, if that would leave the tenant no active admin key, or if the calling key is one of them, `details.field` `id`: a user cannot delete themselves).',
  })
  @ApiOkResponse({ type: UserResponse })
  @ApiErrors(400, 401, 403, 404, 409, 429)
  remove(@Caller() caller: Principal, @Param('id', ParseIdPipe) id: string): Promise<UserResponse> {
    return this.users.remove(caller, id);
  }
}
