/**
 * The set-up the command-line tools that touch sealed secrets share (`secrets:reseal`,
 * `oidc:rotate-key`): load the configuration, open the database, make start-up's check of
 * SVC_ENCRYPTION_KEY, run the work, close the database. A tool must not seal anything under a
 * key that does not open what is already stored: the next start would refuse, or OAuth break.
 */
import 'reflect-metadata';
import { DataSource } from 'typeorm';
import { AppConfig, loadConfig } from '../config/app-config';
import { dataSourceOptions } from '../database/data-source-options';
import { checkEncryptionKey } from './sealed-columns';
import { SecretBox } from './secret-box';

export interface CheckedSecrets {
  config: AppConfig;
  db: DataSource;
  secrets: SecretBox;
}

export async function withCheckedSecrets<T>(work: (ctx: CheckedSecrets) => Promise<T>): Promise<T> {
  const config = loadConfig();
  const db = new DataSource(dataSourceOptions(config));
  await db.initialize();
  try {
    const secrets = new SecretBox(config, db);
    await checkEncryptionKey(secrets, db, config);
    return await work({ config, db, secrets });
  } finally {
    await db.destroy();
  }
}
