/**
 * oidc-provider's storage adapter on PostgreSQL (table oidc_models): one row per model
 * instance. A client's `client_secret` is sealed (AES-256-GCM, SecretBox) before it is stored
 * and opened when read, so the table never holds a usable secret. Expired rows are returned
 * as they are: the provider checks expiry itself, and an expired token stays distinguishable
 * from an unknown one until the janitor removes it.
 *
 * Nor does it hold a usable token: the opaque value of an access or refresh token, a code or a
 * device code is its id (`jti`), so the row of such a model is keyed by the id's SHA-256
 * (`storedTokenId`) and its payload keeps no `jti`. Every lookup starts from the value the caller
 * presents, which the adapter digests and gives back as `jti`; anything else that looks a token
 * up in oidc_models goes through `storedTokenId` too. The device flow finds a device code by its
 * user code, not by its value, and then saves it under its id, so a device code's id is also kept
 * sealed in its payload (opened only for that lookup). Clients, grants, sessions and interactions
 * keep their plain ids, which the account pages and the interaction handlers look up directly.
 * A sealed value that no configured key opens (the old key dropped before `secrets:reseal` ran)
 * leaves its row unknown, with a warning: the client is `invalid_client`, the user code a wrong one.
 * A client's previous secret (PREVIOUS_SECRET, the overlap after a rotation) is sealed the same
 * way; read once its overlap ended, or unopenable, it is left out (the client stays, with its
 * current secret alone), and the next write of the client drops it.
 *
 * A refresh token that was used (rotated) is kept as a tombstone even when its grant is revoked:
 * presenting it again is reuse, answered `token_reuse_detected` every time, until the janitor deletes
 * it a day after its own expiry (token-reuse.ts). So the deletions that keep them are
 * here, for the users module too (`deleteGrant`, `endAccounts`, `endProviderSessions`); a deleted
 * client's rows go whole (clients.service.ts).
 *
 * Using a code or refresh token is one conditional UPDATE: of two requests that present the same
 * one at the same moment (both having read it unused), one wins; for the other it is a reuse,
 * and like a reuse the provider sees in sequence, it revokes the grant with all its tokens.
 *
 * A user's connection to a client has one grant (SPEC 5.8): consent finds it, or makes it, under
 * the connection's lock (`underConnectionLock`), inside whose transaction the adapter's own
 * queries run too.
 */
import { Logger } from '@nestjs/common';
import { textIssue } from '../common/input-policy';
import { AsyncLocalStorage } from 'node:async_hooks';
import { randomBytes } from 'node:crypto';
import type { Adapter, AdapterPayload } from 'oidc-provider';
import type { DataSource, EntityManager } from 'typeorm';
import type { SecretBox } from '../crypto/secret-box';
import { hashSecret } from '../keys/key-secrets';

export const secretAad = (clientId: string) => `oidc-client:${clientId}`;
/** The previous secret's own AAD, so that its sealed text moved into `client_secret` (or back) opens nowhere. */
export const previousSecretAad = (clientId: string) => `oidc-client-previous:${clientId}`;

/**
 * Where a client keeps the secret a rotation replaced while it still authenticates beside the new
 * one (clients.service.ts, previous-client-secret.ts): sealed as `client_secret` is, under its own
 * AAD, with the end of its overlap in epoch milliseconds. Not client metadata: the provider's
 * Client leaves unknown fields out, so neither reaches its answers (RFC 7592 reads included).
 */
export const PREVIOUS_SECRET = 'previous_client_secret';
export const PREVIOUS_SECRET_ENDS = 'previous_client_secret_expires_ms';
export const deviceJtiAad = (rowId: string) => `oidc-device-code:${rowId}`;

/**
 * The models whose id is the opaque value of a credential (see the header). The provider's
 * models this service leaves disabled are listed too, so enabling one cannot store its values
 * usable.
 */
const TOKEN_MODELS = new Set([
  'AccessToken',
  'ClientCredentials',
  'RefreshToken',
  'AuthorizationCode',
  'DeviceCode',
  'RegistrationAccessToken',
  'InitialAccessToken',
  'BackchannelAuthenticationRequest',
  'PushedAuthorizationRequest',
]);

/** Where a device code keeps its sealed id, for the lookup by user code (see the header). */
export const SEALED_JTI = 'svcSealedJti';

/**
 * The row id of a token, code or device code in oidc_models: the SHA-256 of the value, hex.
 * A fast, unsalted digest is enough: the values are 256 random bits, nothing to guess from a
 * digest, and a lookup needs the same digest of the same value every time.
 */
export function storedTokenId(value: string): string {
  return hashSecret(value);
}

const rowId = (model: string, id: string) => (TOKEN_MODELS.has(model) ? storedTokenId(id) : id);

/** The transaction of `underConnectionLock` that the adapter's queries made inside it join. */
const joined = new AsyncLocalStorage<EntityManager>();

/**
 * Runs `work` in one transaction holding the advisory lock of one user's connection to one
 * client, so that consents given at once (two browsers, a browser and a device) find or make one
 * grant between them. The provider's reads and saves made by `work` run in that transaction as
 * well: the lock holds one pooled connection, not one while waiting for another.
 */
export function underConnectionLock<T>(db: DataSource, accountId: string, clientId: string, work: (m: EntityManager) => Promise<T>): Promise<T> {
  return inTransaction(db, async (m) => {
    await m.query('SELECT pg_advisory_xact_lock(hashtext($1))', [`oauth-connection:${accountId}:${clientId}`]);
    return work(m);
  });
}

/** Runs `work` in one transaction that the provider's reads and saves made by it join. */
export function inTransaction<T>(db: DataSource, work: (m: EntityManager) => Promise<T>): Promise<T> {
  return db.transaction((m) => joined.run(m, () => work(m)));
}

/** The grant of a user's connection to a client (the newest, should an older version of the service have left several). */
export async function connectionGrantId(m: EntityManager, accountId: string, clientId: string): Promise<string | undefined> {
  const [row]: Array<{ id: string }> = await m.query(
    `SELECT id FROM oidc_models WHERE model = 'Grant' AND payload->>'accountId' = $1 AND payload->>'clientId' = $2 AND (expires_at IS NULL OR expires_at > now())
      ORDER BY (payload->>'iat')::bigint DESC, id LIMIT 1`,
    [accountId, clientId],
  );
  return row?.id;
}

/** A used refresh token (see the header): what deleting a grant's, or an account's, rows keeps. */
export const TOMBSTONE = `(model = 'RefreshToken' AND consumed_at IS NOT NULL)`;

/**
 * Deletes a grant with every token and code it issued, keeping used refresh tokens as tombstones.
 * Answers the grant's account when this call deleted the grant (undefined when it was gone already).
 */
export async function deleteGrant(db: DataSource | EntityManager, grantId: string): Promise<string | undefined> {
  const [rows]: [Array<{ account_id: string | null }>, number] = await db.query(
    `DELETE FROM oidc_models WHERE (grant_id = $1 OR (model = 'Grant' AND id = $1)) AND NOT ${TOMBSTONE}
      RETURNING CASE WHEN model = 'Grant' THEN payload->>'accountId' END AS account_id`,
    [grantId],
  );
  return rows.find((r) => r.account_id)?.account_id ?? undefined;
}

/**
 * Ends the OAuth life of deleted users: their grants' tokens, then every row of the accounts
 * (grants, sessions), each statement on its index; the grants it ended. Used refresh tokens stay,
 * as a revoked grant's do, so that presenting one is still a reuse.
 */
export async function endAccounts(m: EntityManager, accountIds: string[]): Promise<Array<{ id: string; client_id: string }>> {
  const grants: Array<{ id: string; client_id: string }> = await m.query(
    `SELECT id, payload->>'clientId' AS client_id FROM oidc_models WHERE model = 'Grant' AND payload->>'accountId' = ANY($1::text[])`,
    [accountIds],
  );
  await m.query(`DELETE FROM oidc_models WHERE grant_id = ANY($1::text[]) AND NOT ${TOMBSTONE}`, [grants.map((g) => g.id)]);
  await m.query(`DELETE FROM oidc_models WHERE payload->>'accountId' = ANY($1::text[]) AND NOT ${TOMBSTONE}`, [accountIds]);
  return grants;
}

/** Ends an account's provider sessions (its apps keep their grants): how many. Account ids are UUIDs of one tenant's user, so no tenant is named. */
export async function endProviderSessions(m: EntityManager, accountId: string): Promise<number> {
  const [, count]: [unknown, number] = await m.query(`DELETE FROM oidc_models WHERE model = 'Session' AND payload->>'accountId' = $1`, [accountId]);
  return count;
}

/** Whether this refresh token was used already (a reuse if presented again). */
export async function isUsedRefreshToken(db: DataSource, token: string, clientId: string | undefined): Promise<boolean> {
  const rows = await db.query(
    `SELECT 1 FROM oidc_models WHERE model = 'RefreshToken' AND id = $1 AND consumed_at IS NOT NULL AND payload->>'clientId' = $2`,
    [storedTokenId(token), clientId ?? null],
  );
  return rows.length > 0;
}

/**
 * Called after a request lost the race to use a code or refresh token and the grant was revoked:
 * must throw the error the client gets.
 */
export type ConcurrentUse = (model: string, grantId: string | undefined) => Promise<never>;

/**
 * Called when a revocation deleted a grant, with the account it was for: the row is gone before
 * the provider announces the revocation, and several requests may revoke one grant at once (a
 * race to use a code): this is called for the one whose delete took the row.
 */
export type GrantDeleted = (grantId: string, accountId: string) => void;

/**
 * Takes an interaction's decision for the caller: true for exactly one of any number of
 * requests, so a consent form submitted twice (a double click) makes one grant, not two. The
 * provider keeps no consumed state on interactions; the row's consumed_at is free for this.
 */
export async function claimInteraction(db: DataSource, uid: string): Promise<boolean> {
  const [, claimed]: [unknown, number] = await db.query(
    `UPDATE oidc_models SET consumed_at = now() WHERE model = 'Interaction' AND id = $1 AND consumed_at IS NULL`,
    [uid],
  );
  return claimed === 1;
}

/** The payload key of a device code's claim; the provider does not read it, and saving the code drops it. */
const DEVICE_CLAIM = 'svcDecisionClaim';

/**
 * Marks a device code as being decided, if nothing decided or claimed it yet: answers the
 * claim's token for exactly one of any number of submissions, undefined for the others. Saving
 * the decided code replaces the payload, claim included.
 */
export async function claimDeviceCode(db: DataSource, jti: string): Promise<string | undefined> {
  const token = randomBytes(12).toString('base64url');
  const [, claimed]: [unknown, number] = await db.query(
    `UPDATE oidc_models SET payload = payload || jsonb_build_object('${DEVICE_CLAIM}', $2::text)
      WHERE model = 'DeviceCode' AND id = $1 AND consumed_at IS NULL AND NOT payload ?| array['accountId', 'error', '${DEVICE_CLAIM}']`,
    [storedTokenId(jti), token],
  );
  return claimed === 1 ? token : undefined;
}

/** Gives up a claim that was not followed by a decision, so the user may try again. */
export async function releaseDeviceCode(db: DataSource, jti: string, token: string): Promise<void> {
  await db.query(
    `UPDATE oidc_models SET payload = payload - '${DEVICE_CLAIM}' WHERE model = 'DeviceCode' AND id = $1 AND payload ->> '${DEVICE_CLAIM}' = $2`,
    [storedTokenId(jti), token],
  );
}

const logger = new Logger('OAuth');

/** A sealed value no configured key opens: one warning, and the row is treated as absent. */
function unopenable(what: string): undefined {
  logger.warn(`${what} is sealed under an encryption key no longer configured (SVC_ENCRYPTION_KEY, SVC_ENCRYPTION_KEY_PREVIOUS); treated as unknown`);
  return undefined;
}

/** A client's previous secret opened in place while its overlap lasts; else both fields go (see the header). */
async function openPreviousSecret(payload: AdapterPayload, clientId: string, secrets: SecretBox): Promise<void> {
  const ends = payload[PREVIOUS_SECRET_ENDS];
  const sealed = payload[PREVIOUS_SECRET];
  const live = typeof ends === 'number' && ends > Date.now() && typeof sealed === 'string';
  const opened = live ? await secrets.tryOpen(sealed, previousSecretAad(clientId)) : undefined;
  if (live && !opened) unopenable(`OAuth client ${clientId}'s previous secret`);
  if (opened) payload[PREVIOUS_SECRET] = opened.plaintext;
  else {
    delete payload[PREVIOUS_SECRET];
    delete payload[PREVIOUS_SECRET_ENDS];
  }
}

/**
 * Why a payload cannot be stored, if it cannot: text with a NUL character or an unpaired
 * surrogate, which a jsonb value cannot hold (PostgreSQL refuses them). The provider stores
 * request parameters as they came (an authorization request's `state` or `nonce` in its
 * Interaction, a registration's metadata in its Client), so this is where such input meets the
 * text rule (input-policy.ts) every other route applies before it gets this far.
 */
export function unstorableText(value: unknown): string | undefined {
  if (typeof value === 'string') return textIssue(value);
  if (value === null || typeof value !== 'object') return undefined;
  for (const [key, v] of Object.entries(value)) {
    const problem = textIssue(key) ?? unstorableText(v);
    if (problem) return problem;
  }
  return undefined;
}

/** An error the provider answers as it answers its own (`expose`): 400 `invalid_request`, or a redirect carrying it. */
export const textRefused = (problem: string) => Object.assign(new Error('invalid_request'), { expose: true, statusCode: 400, error_description: `a parameter ${problem}` });

/**
 * @param keepsGrant true while a revocation must leave the rest of the grant alone (an access
 *   token's at the revocation endpoint, SPEC 5.7: the token only, where a refresh token takes the
 *   whole grant with it; a logout's): then the provider's clean-up of the grant's tokens is skipped.
 */
export function postgresAdapter(
  db: DataSource,
  secrets: SecretBox,
  concurrentUse: ConcurrentUse,
  keepsGrant: () => boolean,
  grantDeleted: GrantDeleted,
): new (model: string) => Adapter {
  const sql = (text: string, params: unknown[]) => (joined.getStore() ?? db).query(text, params);
  return class PostgresAdapter implements Adapter {
    constructor(private readonly model: string) {}

    async upsert(id: string, payload: AdapterPayload, expiresIn: number): Promise<void> {
      const problem = unstorableText(payload);
      if (problem) throw textRefused(problem);
      const key = rowId(this.model, id);
      let stored = payload;
      if (this.model === 'Client') {
        if (typeof payload.client_secret === 'string') {
          stored = { ...stored, client_secret: await secrets.seal(payload.client_secret, secretAad(id)), client_secret_sealed: true };
        }
        const previous = payload[PREVIOUS_SECRET];
        if (typeof previous === 'string') stored = { ...stored, [PREVIOUS_SECRET]: await secrets.seal(previous, previousSecretAad(id)) };
      } else if (key !== id) {
        const { jti: _value, ...rest } = payload;
        stored = this.model === 'DeviceCode' ? { ...rest, [SEALED_JTI]: await secrets.seal(id, deviceJtiAad(key)) } : rest;
      }
      await sql(
        `INSERT INTO oidc_models (model, id, payload, grant_id, user_code, uid, expires_at)
         VALUES ($1, $2, $3, $4, $5, $6, CASE WHEN $7::int > 0 THEN now() + make_interval(secs => $7) END)
         ON CONFLICT (model, id) DO UPDATE SET payload = EXCLUDED.payload, grant_id = EXCLUDED.grant_id,
           user_code = EXCLUDED.user_code, uid = EXCLUDED.uid, expires_at = EXCLUDED.expires_at`,
        [this.model, key, stored, payload.grantId ?? null, payload.userCode ?? null, payload.uid ?? null, Math.floor(expiresIn ?? 0)],
      );
    }

    async find(id: string): Promise<AdapterPayload | undefined> {
      const found = await this.findBy('id', rowId(this.model, id));
      return found && TOKEN_MODELS.has(this.model) ? { ...found, jti: id } : found;
    }

    /**
     * The user code stays in the clear (column user_code): the user reads it off the device and
     * types it in, it lives ten minutes, and alone it gets no tokens; the device code does.
     */
    async findByUserCode(userCode: string): Promise<AdapterPayload | undefined> {
      return this.findBy('user_code', userCode);
    }

    async findByUid(uid: string): Promise<AdapterPayload | undefined> {
      return this.findBy('uid', uid);
    }

    async consume(id: string): Promise<void> {
      const key = rowId(this.model, id);
      const [, used]: [unknown, number] = await sql(
        `UPDATE oidc_models SET consumed_at = now() WHERE model = $1 AND id = $2 AND consumed_at IS NULL`,
        [this.model, key],
      );
      if (used === 1) return;
      const [row]: Array<{ grant_id: string | null }> = await sql(`SELECT grant_id FROM oidc_models WHERE model = $1 AND id = $2`, [this.model, key]);
      const grantId = row?.grant_id ?? undefined;
      const accountId = grantId ? await deleteGrant(db, grantId) : undefined;
      if (grantId && accountId) grantDeleted(grantId, accountId);
      await concurrentUse(this.model, grantId);
    }

    async destroy(id: string): Promise<void> {
      const [rows]: [Array<{ account_id: string | null }>, number] = await sql(
        `DELETE FROM oidc_models WHERE model = $1 AND id = $2 AND NOT ${TOMBSTONE} RETURNING payload->>'accountId' AS account_id`,
        [this.model, rowId(this.model, id)],
      );
      // The provider destroys a grant only to revoke it (lib/helpers/revoke.js).
      if (this.model === 'Grant' && rows[0]?.account_id) grantDeleted(id, rows[0].account_id);
    }

    async revokeByGrantId(grantId: string): Promise<void> {
      if (keepsGrant()) return;
      await sql(`DELETE FROM oidc_models WHERE grant_id = $1 AND NOT ${TOMBSTONE}`, [grantId]);
    }

    /** The stored payload as the provider saved it: `jti` is put back by `find`, or here from the sealed copy. */
    private async findBy(column: 'id' | 'user_code' | 'uid', value: string): Promise<AdapterPayload | undefined> {
      // A value the client made up, such as a client_id: PostgreSQL's text cannot hold NUL, so no row has one.
      if (value.includes('\0')) return undefined;
      const [row]: Array<{ id: string; payload: AdapterPayload; consumed: boolean }> = await sql(
        `SELECT id, payload, consumed_at IS NOT NULL AS consumed FROM oidc_models WHERE model = $1 AND ${column} = $2`,
        [this.model, value],
      );
      if (!row) return undefined;
      const payload: AdapterPayload = { ...row.payload, ...(row.consumed ? { consumed: true } : {}) };
      if (payload.client_secret_sealed) {
        const secret = await secrets.tryOpen(payload.client_secret as string, secretAad(row.id));
        // Sealed under a key no longer configured (SVC_ENCRYPTION_KEY_PREVIOUS dropped before
        // `secrets:reseal`): a client whose secret nothing can check is not one to authenticate,
        // so it is unknown (`invalid_client`), as a 500 on every request would not tell the client.
        if (!secret) return unopenable(`OAuth client ${row.id}'s secret`);
        payload.client_secret = secret.plaintext;
        delete payload.client_secret_sealed;
      }
      if (payload[PREVIOUS_SECRET] !== undefined) await openPreviousSecret(payload, row.id, secrets);
      if (TOKEN_MODELS.has(this.model)) {
        const sealed = payload[SEALED_JTI];
        delete payload[SEALED_JTI];
        if (column !== 'id') {
          // Without its id the code could not be saved again; one converted by the migration has none.
          if (typeof sealed !== 'string') return undefined;
          // Sealed under a key no longer configured: the code cannot be saved again, so it is unknown, as a wrong code is.
          const jti = await secrets.tryOpen(sealed, deviceJtiAad(row.id));
          if (!jti) return unopenable('a device code looked up by its user code');
          payload.jti = jti.plaintext;
        }
      }
      return payload;
    }
  };
}
