/**
 * A warning a periodic task repeats while a dependency is away (the event relay's pass, each
 * write's announcement): the first failure is logged with its error, later ones are counted and
 * summed up at most once a minute, and the end of the outage is logged once. A 22 s Redis stop
 * wrote some 350 warnings per instance, each with a stack, one per relay pass.
 */
import type { LoggerService } from '@nestjs/common';

export class OutageLog {
  private since?: number;
  /** Failures since the last line, and since the first. */
  private repeated = 0;
  private total = 0;
  private summarised = 0;

  constructor(
    private readonly logger: Pick<LoggerService, 'warn' | 'log'>,
    private readonly what: string,
    private readonly summaryEveryMs = 60_000,
    private readonly now: () => number = Date.now,
  ) {}

  failed(err: unknown): void {
    const now = this.now();
    if (this.since === undefined) {
      this.since = this.summarised = now;
      this.repeated = this.total = 0;
      this.logger.warn({ err }, this.what);
      return;
    }
    this.repeated++;
    this.total++;
    if (now - this.summarised < this.summaryEveryMs) return;
    this.logger.warn({ err, repeated: this.repeated, since: new Date(this.since).toISOString() }, `${this.what} (still failing)`);
    this.summarised = now;
    this.repeated = 0;
  }

  succeeded(): void {
    if (this.since === undefined) return;
    this.logger.log({ failing_ms: this.now() - this.since, repeated: this.total }, `${this.what}: recovered`);
    this.since = undefined;
  }
}
