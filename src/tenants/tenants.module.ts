/** Tenants: `POST /tenants` provisioning (tenant row plus first admin key), `GET /tenants`, `GET /tenants/{id}`, and `DELETE /tenants/{id}` with the purge of a deleted tenant's data. */
import { Module } from '@nestjs/common';
import { AuditModule } from '../audit/audit.module';
import { BlobsModule } from '../blobs/blobs.module';
import { KeysModule } from '../keys/keys.module';
import { OidcModule } from '../oidc/oidc.module';
import { UsersModule } from '../users/users.module';
import { TenantPurge } from './tenant-purge';
import { TenantsController } from './tenants.controller';
import { TenantsService } from './tenants.service';

@Module({
  imports: [AuditModule, KeysModule, UsersModule, OidcModule, BlobsModule],
  controllers: [TenantsController],
  providers: [TenantsService, TenantPurge],
})
export class TenantsModule {}
