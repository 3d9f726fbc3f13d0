/**
 * Edges: edge types (`/edge-types`: which item types may link, cardinality, acyclicity) and
 * the edges themselves (`/edges`, `/items/{id}/edges`), with the dual permission gate of
 * SPEC 2.7. Exports EdgesService, which the items module uses to fill `Item.edges`
 * (`outgoingFor`) and to create the `edges` of an item write (`createMany`).
 */
import { Module } from '@nestjs/common';
import { TypesModule } from '../types/types.module';
import { EdgeTypesController } from './edge-types.controller';
import { EdgeTypesService } from './edge-types.service';
import { EdgesController } from './edges.controller';
import { EdgesService } from './edges.service';

@Module({
  imports: [TypesModule],
  controllers: [EdgeTypesController, EdgesController],
  providers: [EdgeTypesService, EdgesService],
  exports: [EdgesService, EdgeTypesService],
})
export class EdgesModule {}
