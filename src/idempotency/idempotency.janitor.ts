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
const MAX_BATCHES = 100;

@Injectable()
export class IdempotencyJanitor extends PeriodicTask {
  constructor(private readonly store: IdempotencyStore) {
    super(new Logger('Idempotency'), 'expired idempotency keys could not be deleted');
  }

  protected intervalMs(): number {
    return SWEEP_INTERVAL_MS;
  }

  /** Returns how many keys it deleted. */
  protected async pass(): Promise<number> {
    let total = 0;
    for (let i = 0, n = BATCH; i < MAX_BATCHES && n === BATCH && !this.stopped; i++, total += n) {
      n = await this.store.purgeExpired(BATCH);
    }
    return total;
  }
}
