/**
 * `npm run oidc:rotate-key`: adds a new id_token signing key (newest signs) and, with
 * `--retire-older-than=<days>`, retires keys older than that. Instances load keys at start:
 * restart them after a rotation; until then the old key still signs and both verify.
 */
import 'reflect-metadata';
import { DataSource } from 'typeorm';
import { loadConfig } from '../config/app-config';
import { SecretBox } from '../crypto/secret-box';
import { dataSourceOptions } from '../database/data-source-options';
import { SigningKeys } from './signing-keys';

async function main(): Promise<void> {
  const config = loadConfig();
  const retire = /^--retire-older-than=(\d+)$/.exec(process.argv[2] ?? '')?.[1];
  const db = new DataSource(dataSourceOptions(config));
  await db.initialize();
  try {
    const kid = await new SigningKeys(db, new SecretBox(config, db)).rotate();
    console.log(`new signing key ${kid}`);
    if (retire !== undefined) {
      const [rows] = await db.query(
        `UPDATE oidc_signing_keys SET retired_at = now() WHERE retired_at IS NULL AND kid <> $1 AND created_at < now() - make_interval(days => $2::int) RETURNING kid`,
        [kid, Number(retire)],
      );
      for (const r of rows as Array<{ kid: string }>) console.log(`retired ${r.kid}`);
    }
  } finally {
    await db.destroy();
  }
}

main().catch((err: Error) => {
  console.error(`rotation failed: ${err.message}`);
  process.exit(1);
});
