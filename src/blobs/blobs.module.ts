/**
 * Blobs: owns `POST /blobs`, `GET /blobs`, `GET|HEAD|DELETE /blobs/{hash}` and
 * `GET /blobs/{hash}/metadata`, the `blobs` metadata table, and the content stores (disk under
 * BLOB_DIR, or `blob_chunks` in PostgreSQL, chosen by BLOB_STORAGE) behind the BlobStore
 * interface. Content is named by SHA-256 and stored once per tenant. Exports BlobsService, whose
 * `findMissing` lets the items module check `sha256:<hex>` references (and hold them against a
 * deletion until the item commits).
 */
import { Module } from '@nestjs/common';
import { getDataSourceToken } from '@nestjs/typeorm';
import type { DataSource } from 'typeorm';
import { AuditModule } from '../audit/audit.module';
import { AppConfig } from '../config/app-config';
import { BLOB_STORE, BlobStore } from './blob-store';
import { BlobsController } from './blobs.controller';
import { BlobsService } from './blobs.service';
import { DiskBlobStore } from './disk-blob-store';
import { PostgresBlobStore } from './postgres-blob-store';
import { StagingJanitor } from './staging-janitor';

@Module({
  imports: [AuditModule],
  controllers: [BlobsController],
  providers: [
    BlobsService,
    StagingJanitor,
    {
      provide: BLOB_STORE,
      inject: [AppConfig, getDataSourceToken()],
      useFactory: (config: AppConfig, db: DataSource): BlobStore =>
        config.BLOB_STORAGE === 'postgres' ? new PostgresBlobStore(db) : new DiskBlobStore(config.BLOB_DIR),
    },
  ],
  exports: [BlobsService],
})
export class BlobsModule {}
