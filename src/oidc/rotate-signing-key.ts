/**
 * `npm run oidc:rotate-key`: adds a new id_token signing key (newest signs) and, with
 * `--retire-older-than=<days>`, retires keys older than that. Instances load keys at start:
 * restart them after a rotation; until then the old key still signs and both verify.
 * It first makes start-up's check of SVC_ENCRYPTION_KEY (crypto/checked-secrets.ts).
 */
import { StartupError } from '../common/startup-error';
import { withCheckedSecrets } from '../crypto/checked-secrets';
import { SigningKeys } from './signing-keys';

const USAGE = 'usage: npm run oidc:rotate-key [-- --retire-older-than=<days, 1-36500>]';

/** Arguments the script cannot use: refused before anything is rotated. */
export class UsageError extends Error {}

/**
 * The script's arguments. Anything but one `--retire-older-than=<days>` is refused: a
 * misspelt or malformed retirement option used to add a key, retire nothing and exit 0, so
 * the operator believed old keys retired. Days stay below what PostgreSQL can subtract from now().
 */
export function parseRotateArgs(args: readonly string[]): { retireOlderThanDays?: number } {
  if (args.length === 0) return {};
  const days = /^--retire-older-than=([1-9]\d{0,4})$/.exec(args[0])?.[1];
  if (args.length > 1 || days === undefined || Number(days) > 36_500) {
    const bad = args.length > 1 && days !== undefined ? args[1] : args[0];
    throw new UsageError(`unexpected argument ${JSON.stringify(bad)}; nothing was rotated; ${USAGE}`);
  }
  return { retireOlderThanDays: Number(days) };
}

async function main(): Promise<void> {
  const { retireOlderThanDays } = parseRotateArgs(process.argv.slice(2));
  await withCheckedSecrets(async ({ db, secrets }) => {
    const kid = await new SigningKeys(db, secrets).rotate();
    console.log(`new signing key ${kid}`);
    if (retireOlderThanDays !== undefined) {
      const [rows] = await db.query(
        `UPDATE oidc_signing_keys SET retired_at = now() WHERE retired_at IS NULL AND kid <> $1 AND created_at < now() - make_interval(days => $2::int) RETURNING kid`,
        [kid, retireOlderThanDays],
      );
      for (const r of rows as Array<{ kid: string }>) console.log(`retired ${r.kid}`);
    }
  });
}

// Run as a script, not when a test imports parseRotateArgs.
if (require.main === module) {
  main().catch((err: Error) => {
    if (err instanceof StartupError) console.error(`oidc:rotate-key: ${err.message}; nothing was rotated`);
    else console.error(err instanceof UsageError ? `oidc:rotate-key: ${err.message}` : `rotation failed: ${err.message}`);
    process.exit(1);
  });
}
