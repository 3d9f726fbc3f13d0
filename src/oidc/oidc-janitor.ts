/**
 * Deletes the provider's rows a day after they expired (tokens, codes, sessions, interactions;
 * the day keeps an expired token answering `expired_token` rather than `unauthorized`), and
 * device-poll records older than a day. Every instance sweeps; overlapping deletes are harmless.
 */
import { Injectable, Logger } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import { DataSource } from 'typeorm';
import { PeriodicTask } from '../common/periodic-task';

const SWEEP_INTERVAL_MS = 10 * 60 * 1000;
const BATCH = 1000;

@Injectable()
export class OidcJanitor extends PeriodicTask {
  constructor(@InjectDataSource() private readonly db: DataSource) {
    super(new Logger('OAuth'), 'expired OAuth rows could not be deleted');
  }

  protected intervalMs(): number {
    return SWEEP_INTERVAL_MS;
  }

  /** Returns how many rows it deleted. */
  protected async pass(): Promise<number> {
    const total = await this.inBatches(
      BATCH,
      async () => (await this.db.query(`DELETE FROM oidc_models WHERE ctid IN (SELECT ctid FROM oidc_models WHERE expires_at < now() - interval '1 day' LIMIT ${BATCH})`))[1],
    );
    const [, polls]: [unknown, number] = await this.db.query(`DELETE FROM oauth_device_polls WHERE created_at < now() - interval '1 day'`);
    return total + polls;
  }
}
