/**
 * Which users may act, as one SQL condition over `users`: the rule every lookup that signs a
 * person in, resolves their token or cookie, records their consent or makes their key reads
 * through (users.service.ts `authenticate`, `byId` — the provider's `findAccount`, introspection,
 * the bearer resolver, userinfo, the account pages — and `createKey`; consent.ts).
 */

/**
 * A user of a deleted tenant is no user, from the deletion on: one a request in flight created
 * after the deletion deleted the others (the purge removes it later) neither signs in nor has a
 * token resolve.
 */
const IN_LIVE_TENANT = `NOT EXISTS (SELECT 1 FROM tenants t WHERE t.id = users.tenant_id AND t.deleted_at IS NOT NULL)`;

/**
 * Not disabled (PATCH /users/{id}), of a live tenant. Disabling a user also ends what they had
 * (UsersService `endAccess`) under their row's lock; consent and key creation share-lock the row
 * and ask this, so a grant or key made at that moment either came first (and is ended) or is refused.
 */
export const USABLE_USER = `NOT users.disabled AND ${IN_LIVE_TENANT}`;
