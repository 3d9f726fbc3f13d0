import { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * `openid` is no longer a choice on the consent pages (consent.ts): asked for, it comes with any
 * approval. A grant made before, whose user unticked it, remembers it as refused, so the provider
 * never asks again and every sign-in of that app ends without the id_token an OpenID request
 * must get. The refusal is dropped; the next authorization that asks for `openid` shows the
 * consent page again (the scope is neither granted nor refused). `offline_access` decides nothing
 * and is left as it is.
 */
export class OpenidNeverRefused1732300003100 implements MigrationInterface {
  name = 'OpenidNeverRefused1732300003100';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`
      UPDATE oidc_models
         SET payload = jsonb_set(
               payload, '{rejected,openid,scope}',
               to_jsonb(array_to_string(array_remove(string_to_array(payload #>> '{rejected,openid,scope}', ' '), 'openid'), ' ')))
       WHERE model = 'Grant' AND 'openid' = ANY (string_to_array(payload #>> '{rejected,openid,scope}', ' '))`);
  }

  async down(): Promise<void> {
    // Which refusals were dropped is not kept; none is put back.
  }
}
