/**
 * Bulk actions: `POST /items/bulk_action` (dry run, direct run, or a job), the jobs' routes,
 * the Bull worker that runs jobs in chunks, the sweeper that re-queues what Redis lost, and the
 * janitor that deletes ended jobs past their retention.
 * Items change through the items module's write path (ItemWriter), so a bulk change is the
 * same change a single write makes.
 */
import { Module } from '@nestjs/common';
import { ItemsModule } from '../items/items.module';
import { AuthModule } from '../auth/auth.module';
import { SearchModule } from '../search/search.module';
import { TypesModule } from '../types/types.module';
import { BulkController } from './bulk.controller';
import { BulkJanitor } from './bulk-janitor';
import { BulkRunner } from './bulk-runner';
import { BulkService } from './bulk.service';
import { BulkSweeper } from './bulk-sweeper';
import { BulkWorker } from './bulk-worker';

@Module({
  imports: [ItemsModule, SearchModule, TypesModule, AuthModule],
  controllers: [BulkController],
  providers: [BulkService, BulkRunner, BulkWorker, BulkSweeper, BulkJanitor],
})
export class BulkModule {}
