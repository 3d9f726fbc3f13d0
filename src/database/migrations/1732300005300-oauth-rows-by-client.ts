import { MigrationInterface, QueryRunner } from 'typeorm';
import { buildIndexConcurrently } from '../concurrent-index';

/**
 * `oidc_models_client` (client id, model) over the rows a client's admin routes look up by
 * client: its users' grants (an update narrows them, a deletion or block ends them), its codes
 * not yet exchanged, client-credentials tokens, device codes and registration access token. Each
 * of those statements read every row of every model: 335 ms at 1.1M rows (300k grants, 800k
 * access and refresh tokens), under the client's row lock; 0.3-10 ms with the index (EXPLAIN
 * ANALYZE, docs/oauth.md). Access and refresh tokens, the rows written most, are left out: they
 * go with their grant (`grant_id`).
 *
 * The statements (clients.service.ts, blocked-clients.ts) name their models as constants, which
 * the planner needs to use a partial index; the list here holds every model they name.
 * Built CONCURRENTLY, as migration 5000's, so that token requests go on while it builds.
 */
export class OauthRowsByClient1732300005300 implements MigrationInterface {
  name = 'OauthRowsByClient1732300005300';
  transaction = false;

  async up(q: QueryRunner): Promise<void> {
    await buildIndexConcurrently(q, 'oidc_models_client', `oidc_models ((payload->>'clientId'), model)
         WHERE model IN ('Grant', 'AuthorizationCode', 'ClientCredentials', 'DeviceCode', 'RegistrationAccessToken')`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`DROP INDEX oidc_models_client`);
  }
}
