/** Users: `/users` (admin) and the lookups the OAuth provider signs people in with. */
import { Module } from '@nestjs/common';
import { AuditModule } from '../audit/audit.module';
import { KeysModule } from '../keys/keys.module';
import { UsersController } from './users.controller';
import { UsersService } from './users.service';

@Module({ imports: [AuditModule, KeysModule], controllers: [UsersController], providers: [UsersService], exports: [UsersService] })
export class UsersModule {}
