/**
 * Deletes the provider's rows a day after they expired (tokens, codes, sessions, interactions;
 * the day keeps an expired token answering `expired_token` rather than `unauthorized`), and
 * device-poll records older than a day. Every instance sweeps; overlapping deletes are harmless.
 */
import { Injectable, Logger, OnApplicationBootstrap, OnApplicationShutdown } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import { DataSource } from 'typeorm';

const SWEEP_INTERVAL_MS = 10 * 60 * 1000;
const BATCH = 1000;

@Injectable()
export class OidcJanitor implements OnApplicationBootstrap, OnApplicationShutdown {
  private readonly logger = new Logger('OAuth');
  private timer?: NodeJS.Timeout;

  constructor(@InjectDataSource() private readonly db: DataSource) {}

  onApplicationBootstrap(): void {
    this.timer = setInterval(() => void this.sweep(), SWEEP_INTERVAL_MS);
    this.timer.unref();
  }

  onApplicationShutdown(): void {
    clearInterval(this.timer);
  }

  /** Returns how many rows it deleted. */
  async sweep(): Promise<number> {
    try {
      let total = 0;
      for (;;) {
        const [, n]: [unknown, number] = await this.db.query(
          `DELETE FROM oidc_models WHERE ctid IN (SELECT ctid FROM oidc_models WHERE expires_at < now() - interval '1 day' LIMIT ${BATCH})`,
        );
        total += n;
        if (n < BATCH) break;
      }
      const [, polls]: [unknown, number] = await this.db.query(`DELETE FROM oauth_device_polls WHERE created_at < now() - interval '1 day'`);
      return total + polls;
    } catch (err) {
      this.logger.warn({ err }, 'expired OAuth rows could not be deleted');
      return 0;
    }
  }
}
