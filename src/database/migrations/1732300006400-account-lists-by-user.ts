import { MigrationInterface, QueryRunner } from 'typeorm';
import { buildIndexConcurrently } from '../concurrent-index';

/**
 * A user's grants and provider sessions are listed a page at a time, newest first (`/auth/grants`,
 * `/auth/sessions`, `/users/{id}/grants`), keyed by (issued or signed-in second, id). The account
 * index (migration 3000: account, model) found the user's rows but left each page to read and sort
 * all of them; these two make a page a range of an index:
 * - oidc_models_account_grants: (account, issued second DESC, id DESC) over Grant rows;
 * - oidc_models_account_sessions: (account, signed-in second DESC) over Session rows: a session's
 *   listed id is a digest computed from its id, which orders the sessions of one second only.
 *
 * The expressions are GrantsService's (GRANT_IAT, SESSION_SIGNED_IN), which must stay equal to
 * them for the indexes to serve. Built CONCURRENTLY, as migration 5000's, so that sign-ins and
 * token requests go on while they build.
 */
export class AccountListsByUser1732300006400 implements MigrationInterface {
  name = 'AccountListsByUser1732300006400';
  transaction = false;

  async up(q: QueryRunner): Promise<void> {
    await buildIndexConcurrently(q, 'oidc_models_account_grants', `oidc_models
         ((payload->>'accountId'), (COALESCE((payload->>'iat')::bigint, 0)) DESC, id DESC) WHERE model = 'Grant'`);
    await buildIndexConcurrently(q, 'oidc_models_account_sessions', `oidc_models
         ((payload->>'accountId'), (COALESCE((payload->>'loginTs')::bigint, (payload->>'iat')::bigint, 0)) DESC) WHERE model = 'Session'`);
  }

  // Plain: TypeORM reverts inside a transaction, where CONCURRENTLY is refused (as 4600's down()).
  async down(q: QueryRunner): Promise<void> {
    await q.query(`DROP INDEX IF EXISTS oidc_models_account_sessions`);
    await q.query(`DROP INDEX IF EXISTS oidc_models_account_grants`);
  }
}
