/** API keys: the `/keys` routes, key resolution for the bearer guard, and the key cache. */
import { Module } from '@nestjs/common';
import { AuditModule } from '../audit/audit.module';
import { KeyCache } from './key-cache';
import { KeysController } from './keys.controller';
import { KeysService } from './keys.service';

@Module({
  imports: [AuditModule],
  controllers: [KeysController],
  providers: [KeysService, KeyCache],
  exports: [KeysService],
})
export class KeysModule {}
