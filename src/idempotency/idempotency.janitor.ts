/**
 * Deletes expired idempotency rows now and then. Correctness never depends on it (expired rows
 * count as absent and are replaced by the next claim); it only keeps the table small. Every
 * instance sweeps; the deletes are batched and harmless when they overlap.
 */
import { Injectable, Logger } from '@nestjs/common';
import { PeriodicTask } from '../common/periodic-task';
import { IdempotencyStore } from './idempotency.store';

const SWEEP_INTERVAL_MS = 10 * 60 * 1000;
const BATCH = 1000;

@Injectable()
export class IdempotencyJanitor extends PeriodicTask {
  constructor(private readonly store: IdempotencyStore) {
    super(new Logger('Idempotency'), 'expired idempotency keys could not be deleted');
  }

  protected intervalMs(): number {
    return SWEEP_INTERVAL_MS;
  }

  /**
   * Returns how many keys it deleted: all that have expired, as the other janitors do. A cap of
   * 100 batches a pass (about 170 rows a second) fell behind an instance taking keyed writes
   * faster than that, and the table grew for good.
   */
  protected pass(): Promise<number> {
    return this.inBatches(BATCH, () => this.store.purgeExpired(BATCH));
  }
}
