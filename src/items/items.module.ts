/** Items: `/items` routes (CRUD, natural-key upsert, bulk writes, versions, metadata) and the shared item filter. */
import { Module } from '@nestjs/common';
import { TypesModule } from '../types/types.module';
import { ItemsController } from './items.controller';
import { ItemsService } from './items.service';

@Module({ imports: [TypesModule], controllers: [ItemsController], providers: [ItemsService], exports: [ItemsService] })
export class ItemsModule {}
