/**
 * Blobs: owns `POST /blobs`, `GET|HEAD /blobs/{hash}` and `GET /blobs/{hash}/metadata`, the
 * `blobs` metadata table, and the content stores (disk under BLOB_DIR, or `blob_chunks` in
 * PostgreSQL, chosen by BLOB_STORAGE) behind the BlobStore interface. Content is named by
 * SHA-256 and stored once per tenant. Exports BlobsService, whose `findMissing` lets the items
 * module check `sha256:<hex>` references.
 */
import { Module } from '@nestjs/common';
import { getDataSourceToken } from '@nestjs/typeorm';
import type { DataSource } from 'typeorm';
import { AppConfig } from '../config/app-config';
import { BLOB_STORE, BlobStore } from './blob-store';
import { BlobsController } from './blobs.controller';
import { BlobsService } from './blobs.service';
import { DiskBlobStore } from './disk-blob-store';
import { PostgresBlobStore } from './postgres-blob-store';
import { StagingJanitor } from './staging-janitor';

@Module({
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
