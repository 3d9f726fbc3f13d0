import { MigrationInterface, QueryRunner } from 'typeorm';
import { buildIndexConcurrently } from '../concurrent-index';

/**
 * `GET /auth/clients/{client_id}/grants` (GrantsService.clientPage) pages a client's grants newest
 * first, keyed by (issued second, id). Migration 5300's index (client, model) finds the client's
 * grants but leaves each page to read and sort all of them; `oidc_models_client_grants` (client,
 * issued second DESC, id DESC) over Grant rows makes a page, at any cursor, a range of it
 * (test/list-indexes.e2e-spec.ts). The expression is GrantsService's GRANT_IAT, as in migration
 * 6400's index by account, which must stay equal to it for the index to serve.
 *
 * Built CONCURRENTLY, as migration 6400's, so that sign-ins and token requests go on while it builds.
 */
export class GrantsByClient1732300007100 implements MigrationInterface {
  name = 'GrantsByClient1732300007100';
  transaction = false;

  async up(q: QueryRunner): Promise<void> {
    await buildIndexConcurrently(q, 'oidc_models_client_grants', `oidc_models
         ((payload->>'clientId'), (COALESCE((payload->>'iat')::bigint, 0)) DESC, id DESC) WHERE model = 'Grant'`);
  }

  // Plain: TypeORM reverts inside a transaction, where CONCURRENTLY is refused (as 6400's down()).
  async down(q: QueryRunner): Promise<void> {
    await q.query(`DROP INDEX IF EXISTS oidc_models_client_grants`);
  }
}
