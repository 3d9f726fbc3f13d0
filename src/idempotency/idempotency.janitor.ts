/**
 * Deletes expired idempotency rows now and then. Correctness never depends on it (expired rows
 * count as absent and are replaced by the next claim); it only keeps the table small. Every
 * instance sweeps; the deletes are batched and harmless when they overlap.
 */
import { Injectable, Logger, OnApplicationBootstrap, OnApplicationShutdown } from '@nestjs/common';
import { IdempotencyStore } from './idempotency.store';

const SWEEP_INTERVAL_MS = 10 * 60 * 1000;
const BATCH = 1000;
const MAX_BATCHES = 100;

@Injectable()
export class IdempotencyJanitor implements OnApplicationBootstrap, OnApplicationShutdown {
  private readonly logger = new Logger('Idempotency');
  private timer?: NodeJS.Timeout;
  private stopped = false;

  constructor(private readonly store: IdempotencyStore) {}

  onApplicationBootstrap(): void {
    this.timer = setInterval(() => void this.sweep(), SWEEP_INTERVAL_MS);
    this.timer.unref();
  }

  onApplicationShutdown(): void {
    this.stopped = true;
    clearInterval(this.timer);
  }

  async sweep(): Promise<number> {
    let total = 0;
    try {
      for (let i = 0; i < MAX_BATCHES && !this.stopped; i++) {
        const n = await this.store.purgeExpired(BATCH);
        total += n;
        if (n < BATCH) break;
      }
    } catch (err) {
      if (!this.stopped) this.logger.warn({ err }, 'expired idempotency keys could not be deleted');
    }
    return total;
  }
}
