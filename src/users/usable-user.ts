/**
 * Which users may act, as one SQL condition over `users`: the rule every lookup that signs a
 * person in, resolves their token or cookie, records their consent or makes their key reads
 * through (users.service.ts `authenticate`, `byId` — the provider's `findAccount`, introspection,
 * the bearer resolver, userinfo, the account pages — and `createKey`; consent.ts). Whether a user
 * is disabled now is one rule too (`DISABLED_NOW`), which every read of a user shows.
 */
import { msUntilSql } from '../common/db-clock';

/**
 * A user of a deleted tenant is no user, from the deletion on: one a request in flight created
 * after the deletion deleted the others (the purge removes it later) neither signs in nor has a
 * token resolve.
 */
const IN_LIVE_TENANT = `NOT EXISTS (SELECT 1 FROM tenants t WHERE t.id = users.tenant_id AND t.deleted_at IS NOT NULL)`;

/**
 * Whether the user is disabled now: an admin disabled them, and the end they gave it
 * (`disabled_until`), if any, is still ahead by the database's clock as of the statement, as a
 * key's expiry is judged (keys.service.ts `EXPIRES_IN_MS`): every instance agrees, whatever its own
 * clock says. A disablement whose end has passed is none, to every check and every read
 * (UsersService's `USER_COLUMNS`), with nobody writing the row then; the user's next write clears it.
 */
export const DISABLED_NOW = `(users.disabled AND (users.disabled_until IS NULL OR ${msUntilSql('users.disabled_until')} > 0))`;

/**
 * Not disabled now (`DISABLED_NOW`), of a live tenant. Disabling a user also ends what they had
 * (UsersService `endAccess`) under their row's lock; consent and key creation share-lock the row
 * and ask this, so a grant or key made at that moment either came first (and is ended) or is
 * refused. The end of a disablement ends nothing, so it needs no lock.
 */
export const USABLE_USER = `NOT ${DISABLED_NOW} AND ${IN_LIVE_TENANT}`;
