/** The interface description: `GET /openapi.json` and the `/docs` reference. */
import { Module } from '@nestjs/common';
import { OpenApiController, OpenApiDocument } from './openapi.controller';

@Module({ controllers: [OpenApiController], providers: [OpenApiDocument] })
export class OpenApiModule {}
