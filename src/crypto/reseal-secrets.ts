/**
 * `npm run secrets:reseal`: after SVC_ENCRYPTION_KEY changed (the old key listed in
 * SVC_ENCRYPTION_KEY_PREVIOUS, every instance restarted), re-seals every stored secret under the
 * current key and prints the counts; once it reports nothing unreadable, the previous key can be
 * removed (docs/operations.md, "Rotating SVC_ENCRYPTION_KEY"). Safe to run again.
 */
import { StartupError } from '../common/startup-error';
import { withCheckedSecrets } from './checked-secrets';
import { resealAll } from './sealed-columns';

async function main(): Promise<number> {
  if (process.argv.length > 2) throw new StartupError(`unexpected argument ${JSON.stringify(process.argv[2])}; usage: npm run secrets:reseal`);
  return withCheckedSecrets(async ({ db, secrets }) => {
    const counts = await resealAll(secrets, db);
    for (const c of counts) console.log(`${c.what}: ${c.seen} stored, ${c.resealed} re-sealed${c.unreadable ? `, ${c.unreadable} opened by no key` : ''}`);
    const [kept]: Array<{ until: Date | null }> = await db.query(`SELECT max(expires_at) AS until FROM idempotency_keys WHERE expires_at > now()`);
    if (kept?.until) {
      console.log(`kept idempotent responses cannot be re-sealed (the service does not keep their keys); keep SVC_ENCRYPTION_KEY_PREVIOUS until ${kept.until.toISOString()} for their replays`);
    }
    const unreadable = counts.reduce((n, c) => n + c.unreadable, 0);
    if (unreadable) {
      console.error(`secrets:reseal: ${unreadable} value(s) opened by neither SVC_ENCRYPTION_KEY nor SVC_ENCRYPTION_KEY_PREVIOUS; left as they were`);
      return 1;
    }
    return 0;
  });
}

main().then(
  (code) => process.exit(code),
  (err: Error) => {
    console.error(`secrets:reseal: ${err.message}${err instanceof StartupError ? '; nothing was re-sealed' : ''}`);
    process.exit(1);
  },
);
