/** Tenants: `POST /tenants` provisioning (tenant row plus first admin key), `GET /tenants` and `GET /tenants/{id}`. */
import { Module } from '@nestjs/common';
import { AuditModule } from '../audit/audit.module';
import { KeysModule } from '../keys/keys.module';
import { TenantsController } from './tenants.controller';
import { TenantsService } from './tenants.service';

@Module({
  imports: [AuditModule, KeysModule],
  controllers: [TenantsController],
  providers: [TenantsService],
})
export class TenantsModule {}
