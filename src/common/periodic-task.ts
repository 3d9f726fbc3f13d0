/**
 * What every background sweep shares: a pass every `intervalMs` on each instance (timers that
 * do not hold the process open), never two passes of one task at once, none after shutdown
 * has begun, and a failed pass only logged, since the next one tries again. Shutdown waits for
 * a pass under way, before the connection pools close (their onApplicationShutdown).
 */
import { BeforeApplicationShutdown, Logger, OnApplicationBootstrap } from '@nestjs/common';

export abstract class PeriodicTask implements OnApplicationBootstrap, BeforeApplicationShutdown {
  private timer?: NodeJS.Timeout;
  private running?: Promise<number>;
  /** A pass was asked for (`soon`) while one ran: it runs once that one is done. */
  private again = false;
  /** Set at shutdown; a long pass checks it between batches. */
  protected stopped = false;

  /** `failure` completes the warning logged when a pass fails ("… could not be deleted"). */
  protected constructor(
    private readonly logger: Logger,
    private readonly failure: string,
  ) {}

  /** Milliseconds between passes; undefined when this instance does not run the task. */
  protected abstract intervalMs(): number | undefined;

  /** One pass: how many rows or jobs it handled. */
  protected abstract pass(): Promise<number>;

  onApplicationBootstrap(): void {
    const ms = this.intervalMs();
    if (ms === undefined) return;
    this.timer = setInterval(() => void this.sweep(), ms);
    this.timer.unref();
  }

  async beforeApplicationShutdown(): Promise<void> {
    this.stopped = true;
    clearInterval(this.timer);
    await this.running;
  }

  /**
   * Runs `batch` (one bounded statement: how many rows it took, at most `size`) until one takes
   * fewer than `size` or shutdown begins; how many rows in all. A janitor's deletes go this way,
   * so that none holds its locks on a large backlog for long.
   */
  protected async inBatches(size: number, batch: () => Promise<number>): Promise<number> {
    let total = 0;
    for (let n = size; n === size && !this.stopped; total += n) n = await batch();
    return total;
  }

  /** Runs a pass now (0 when one is already running or shutdown has begun). */
  sweep(): Promise<number> {
    if (this.running || this.stopped) return Promise.resolve(0);
    this.running = this.pass()
      .catch((err: unknown) => {
        if (!this.stopped) this.logger.warn({ err }, this.failure);
        return 0;
      })
      .finally(() => {
        this.running = undefined;
        if (!this.again) return;
        this.again = false;
        void this.sweep();
      });
    return this.running;
  }

  /**
   * A pass before the interval is up, for a task whose work is known to be waiting: at once, or
   * right after the pass under way (several asks while it runs make one pass). Nothing on an
   * instance that does not run the task, or once shutdown has begun.
   */
  protected soon(): void {
    if (!this.timer || this.stopped) return;
    if (this.running) this.again = true;
    else void this.sweep();
  }
}
