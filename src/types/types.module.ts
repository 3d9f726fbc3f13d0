/** Item types: `/types` routes, core type seeds (migration), schema inheritance and validators. */
import { Module } from '@nestjs/common';
import { TypeCatalogService } from './type-catalog';
import { TypesController } from './types.controller';
import { TypesService } from './types.service';

@Module({ controllers: [TypesController], providers: [TypesService, TypeCatalogService], exports: [TypesService, TypeCatalogService] })
export class TypesModule {}
