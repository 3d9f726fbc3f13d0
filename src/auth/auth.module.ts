/**
 * Authentication and authorisation: the bearer strategy, the credential hook and the
 * global guards. Other modules use the decorators in decorators.ts and the checks in
 * permissions.ts; the OAuth module plugs its token resolver in under OAUTH_TOKEN_RESOLVER.
 */
import { Module } from '@nestjs/common';
import { APP_GUARD } from '@nestjs/core';
import { PassportModule } from '@nestjs/passport';
import { KeysModule } from '../keys/keys.module';
import { OidcModule } from '../oidc/oidc.module';
import { BearerStrategy } from './bearer.strategy';
import { CredentialHook } from './credential.hook';
import { CredentialsService } from './credentials.service';
import { BearerGuard, InputGuard, PermissionGuard } from './guards';

@Module({
  imports: [PassportModule, KeysModule, OidcModule],
  providers: [
    BearerStrategy,
    CredentialHook,
    CredentialsService,
    { provide: APP_GUARD, useClass: BearerGuard },
    { provide: APP_GUARD, useClass: PermissionGuard },
    { provide: APP_GUARD, useClass: InputGuard },
  ],
  exports: [CredentialHook, CredentialsService],
})
export class AuthModule {}
