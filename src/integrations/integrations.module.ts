/** Integrations: the manifest registry (`/integrations`) and the connector OAuth bootstrap with its connections (`/oauth/*`, `/connections`). */
import { Module } from '@nestjs/common';
import { AuthModule } from '../auth/auth.module';
import { ConnectionsController } from './connections.controller';
import { ConnectionsService } from './connections.service';
import { IntegrationsController } from './integrations.controller';
import { IntegrationsService } from './integrations.service';

@Module({
  imports: [AuthModule],
  controllers: [IntegrationsController, ConnectionsController],
  providers: [IntegrationsService, ConnectionsService],
  exports: [IntegrationsService],
})
export class IntegrationsModule {}
