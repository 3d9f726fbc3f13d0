/**
 * The RS256 keys that sign id_tokens. The first start generates one (under an advisory lock, so
 * instances starting together make one); keys are stored sealed with the service key and
 * published, every unretired one, in the JWKS, newest first: the newest signs.
 *
 * Rotation: `rotate()` adds a new key (npm run oidc:rotate-key); instances pick it up at their
 * next start, and until every instance has restarted both keys verify. Retiring the old key
 * (setting `retired_at`) removes it from the JWKS once no token it signed is still in use.
 */
import { Injectable } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import { generateKeyPairSync, JsonWebKey, randomUUID } from 'node:crypto';
import { DataSource, EntityManager } from 'typeorm';
import { SecretBox } from '../crypto/secret-box';

const LOCK = 727_003;
export const signingKeyAad = (kid: string) => `oidc-signing-key:${kid}`;

export type PrivateJwk = JsonWebKey & { kid: string; alg: 'RS256'; use: 'sig' };

@Injectable()
export class SigningKeys {
  constructor(
    @InjectDataSource() private readonly db: DataSource,
    private readonly secrets: SecretBox,
  ) {}

  /** Every unretired key, newest first; one is made when there is none. */
  async load(): Promise<PrivateJwk[]> {
    return this.db.transaction(async (m) => {
      await m.query('SELECT pg_advisory_xact_lock($1)', [LOCK]);
      let rows = await this.unretired(m);
      if (!rows.length) {
        await this.insertNew(m);
        rows = await this.unretired(m);
      }
      return Promise.all(rows.map(async (r) => JSON.parse(await this.secrets.open(r.jwk_sealed, signingKeyAad(r.kid))) as PrivateJwk));
    });
  }

  /** Adds a new signing key; returns its kid. */
  async rotate(): Promise<string> {
    return this.db.transaction(async (m) => {
      await m.query('SELECT pg_advisory_xact_lock($1)', [LOCK]);
      return this.insertNew(m);
    });
  }

  private unretired(m: EntityManager): Promise<Array<{ kid: string; jwk_sealed: string }>> {
    return m.query(`SELECT kid, jwk_sealed FROM oidc_signing_keys WHERE retired_at IS NULL ORDER BY created_at DESC, kid`);
  }

  private async insertNew(m: EntityManager): Promise<string> {
    const kid = randomUUID();
    const { privateKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
    const jwk: PrivateJwk = { ...privateKey.export({ format: 'jwk' }), kid, alg: 'RS256', use: 'sig' };
    await m.query(`INSERT INTO oidc_signing_keys (kid, jwk_sealed) VALUES ($1, $2)`, [kid, await this.secrets.seal(JSON.stringify(jwk), signingKeyAad(kid))]);
    return kid;
  }
}
