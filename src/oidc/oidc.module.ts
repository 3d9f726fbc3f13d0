/**
 * The OAuth 2.1 / OIDC provider (SPEC part 5) on oidc-provider: the provider instance and its
 * mount, storage, signing keys and the scope grammar; first-party client registration; OAuth
 * access tokens as Principals (OAUTH_TOKEN_RESOLVER, used by the bearer strategy); the pages
 * people see (sign-in, sign-up, consent, device, the account's grants, sessions and keys) and
 * userinfo; an admin's views of users' grants and of blocked clients.
 */
import { Module } from '@nestjs/common';
import { OAUTH_TOKEN_RESOLVER } from '../auth/principal';
import { AuditModule } from '../audit/audit.module';
import { KeysModule } from '../keys/keys.module';
import { UsersModule } from '../users/users.module';
import { AccountForms } from './account-forms';
import { AccountController } from './account.controller';
import { ClientsController } from './clients.controller';
import { ClientsService } from './clients.service';
import { DeviceController } from './device.controller';
import { InteractionsController } from './interactions.controller';
import { GrantsService } from './grants.service';
import { OAuthTokenCache } from './oauth-token-cache';
import { OAuthTokens } from './oauth-tokens';
import { OidcJanitor } from './oidc-janitor';
import { OidcMount } from './oidc-mount';
import { OidcProvider } from './oidc-provider';
import { SigningKeys } from './signing-keys';
import { BlockedClientsService } from './blocked-clients';
import { BlockedClientsController } from './blocked-clients.controller';
import { UserGrantsController } from './user-grants.controller';
import { UserinfoController } from './userinfo.controller';

@Module({
  imports: [UsersModule, AuditModule, KeysModule],
  controllers: [ClientsController, BlockedClientsController, InteractionsController, DeviceController, UserinfoController, AccountController, UserGrantsController],
  providers: [AccountForms, ClientsService, BlockedClientsService, GrantsService, OidcJanitor, OAuthTokenCache, SigningKeys, OidcProvider, OidcMount, { provide: OAUTH_TOKEN_RESOLVER, useClass: OAuthTokens }],
  exports: [OidcMount, OidcProvider, OAUTH_TOKEN_RESOLVER, ClientsService],
})
export class OidcModule {}
