/** Items: `/items` routes (CRUD, natural-key upsert, bulk writes, versions, metadata) and the shared item filter. */
import { Module } from '@nestjs/common';
import { BlobsModule } from '../blobs/blobs.module';
import { EdgesModule } from '../edges/edges.module';
import { TypesModule } from '../types/types.module';
import { ItemsController } from './items.controller';
import { ItemWriter } from './item-writer';
import { ItemsService } from './items.service';

@Module({ imports: [TypesModule, EdgesModule, BlobsModule], controllers: [ItemsController], providers: [ItemsService, ItemWriter], exports: [ItemsService, ItemWriter] })
export class ItemsModule {}
