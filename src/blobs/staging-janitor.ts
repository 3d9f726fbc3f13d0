/**
 * Removes, every so often, the staging files of uploads that died with a process, so that a
 * crash mid-upload does not leave up to BLOB_MAX_BYTES on disk until the next start-up.
 */
import { Injectable, Logger } from '@nestjs/common';
import { PeriodicTask } from '../common/periodic-task';
import { BlobsService } from './blobs.service';

const SWEEP_INTERVAL_MS = 10 * 60 * 1000;

@Injectable()
export class StagingJanitor extends PeriodicTask {
  constructor(private readonly blobs: BlobsService) {
    super(new Logger('Blobs'), 'stale staging files could not be removed');
  }

  protected intervalMs(): number {
    return SWEEP_INTERVAL_MS;
  }

  protected pass(): Promise<number> {
    return this.blobs.removeStaleStaging();
  }
}
