/**
 * Owns the list of every value sealed at rest (SecretBox) and the two things done with all of
 * them: the key check at start (`checkEncryptionKey`) and the re-sealing under the current key
 * after SVC_ENCRYPTION_KEY changed (`resealAll`, run by `npm run secrets:reseal`).
 *
 * A new sealed column belongs in SEALED_COLUMNS, or the previous key cannot be dropped safely.
 * Not here: kept idempotent responses (idempotency/response-seal.ts) are sealed under a key
 * derived from the service key and the client's Idempotency-Key, which the service does not keep,
 * so they cannot be re-sealed; a previous key still opens them until they expire.
 */
import { DataSource } from 'typeorm';
import { redactUrl, StartupError } from '../common/startup-error';
import { AppConfig } from '../config/app-config';
import { tokenAad } from '../integrations/connections.service';
import { deviceJtiAad, PREVIOUS_SECRET, previousSecretAad, SEALED_JTI, secretAad as clientSecretAad } from '../oidc/oidc-adapter';
import { signingKeyAad } from '../oidc/signing-keys';
import { secretAad as webhookSecretAad } from '../webhooks/signature';
import { SecretBox } from './secret-box';

type Row = Record<string, string>;

export interface SealedColumn {
  /** What the counts call it. */
  what: string;
  table: string;
  /** The primary key, for paging and for writing a row back. */
  key: readonly string[];
  /** SQL reading the sealed text of a row. */
  value: string;
  /** SQL choosing the rows that hold one. */
  where: string;
  /** SQL assignment writing $1, the re-sealed text. */
  set: string;
  aad: (row: Row) => string;
}

const CANARY_NAME = 'encryption-check';
const CANARY_AAD = 'service-keys:encryption-check';
const CANARY_TEXT = 'svc encryption key check';

export const SEALED_COLUMNS: readonly SealedColumn[] = [
  {
    what: 'key check',
    table: 'service_keys',
    key: ['name'],
    value: 'value',
    where: `name = '${CANARY_NAME}'`,
    set: 'value = $1',
    aad: () => CANARY_AAD,
  },
  {
    what: 'OIDC signing keys',
    table: 'oidc_signing_keys',
    key: ['kid'],
    value: 'jwk_sealed',
    where: 'true',
    set: 'jwk_sealed = $1',
    aad: (r) => signingKeyAad(r.kid),
  },
  {
    what: 'webhook secrets',
    table: 'webhooks',
    key: ['tenant_id', 'id'],
    value: 'secret_sealed',
    where: 'true',
    set: 'secret_sealed = $1',
    aad: (r) => webhookSecretAad(r.tenant_id, r.id),
  },
  {
    what: 'previous webhook secrets',
    table: 'webhooks',
    key: ['tenant_id', 'id'],
    value: 'previous_secret_sealed',
    where: 'previous_secret_sealed IS NOT NULL',
    set: 'previous_secret_sealed = $1',
    aad: (r) => webhookSecretAad(r.tenant_id, r.id),
  },
  {
    what: 'connector access tokens',
    table: 'connections',
    key: ['tenant_id', 'id'],
    value: 'access_token_sealed',
    where: 'true',
    set: 'access_token_sealed = $1',
    aad: (r) => tokenAad(r.tenant_id, r.id, 'access'),
  },
  {
    what: 'connector refresh tokens',
    table: 'connections',
    key: ['tenant_id', 'id'],
    value: 'refresh_token_sealed',
    where: 'refresh_token_sealed IS NOT NULL',
    set: 'refresh_token_sealed = $1',
    aad: (r) => tokenAad(r.tenant_id, r.id, 'refresh'),
  },
  {
    what: 'OAuth client secrets',
    table: 'oidc_models',
    key: ['model', 'id'],
    value: `payload->>'client_secret'`,
    where: `model = 'Client' AND payload->>'client_secret_sealed' = 'true' AND payload->>'client_secret' IS NOT NULL`,
    set: `payload = jsonb_set(payload, '{client_secret}', to_jsonb($1::text))`,
    aad: (r) => clientSecretAad(r.id),
  },
  {
    what: 'previous OAuth client secrets',
    table: 'oidc_models',
    key: ['model', 'id'],
    value: `payload->>'${PREVIOUS_SECRET}'`,
    where: `model = 'Client' AND payload->>'${PREVIOUS_SECRET}' IS NOT NULL`,
    set: `payload = jsonb_set(payload, '{${PREVIOUS_SECRET}}', to_jsonb($1::text))`,
    aad: (r) => previousSecretAad(r.id),
  },
  {
    what: 'OAuth device codes',
    table: 'oidc_models',
    key: ['model', 'id'],
    value: `payload->>'${SEALED_JTI}'`,
    where: `model = 'DeviceCode' AND payload->>'${SEALED_JTI}' IS NOT NULL`,
    set: `payload = jsonb_set(payload, '{${SEALED_JTI}}', to_jsonb($1::text))`,
    aad: (r) => deviceJtiAad(r.id),
  },
];

/** `[sealed, ...key values]` of one row, as JSON. */
const sample = (c: SealedColumn) =>
  `(SELECT json_build_array(${c.value}, ${c.key.map((k) => `${k}::text`).join(', ')}) FROM ${c.table} WHERE ${c.where} LIMIT 1)`;

const toRow = (c: SealedColumn, values: string[]): Row => Object.fromEntries(c.key.map((k, i) => [k, values[i + 1]]));

/**
 * Refuses (StartupError) a key that does not open what the database holds sealed: the canary,
 * or before there is one, any one stored value. One query; the canary is written once, the
 * first time a key passes. Without it, a wrong key started a healthy-looking service whose OAuth,
 * webhooks and idempotent replays all failed with 500 and "unable to authenticate data".
 */
export async function checkEncryptionKey(secrets: SecretBox, db: DataSource, config: AppConfig): Promise<void> {
  const where = redactUrl(config.DATABASE_URL);
  const [canaryColumn, ...storedColumns] = SEALED_COLUMNS;
  // The stored values are looked at only while there is no canary (a subquery in a CASE branch not taken does not run).
  const [found]: Array<{ generated: string | null; canary: string[] | null; stored: Array<string[] | null> | null }> = await db.query(
    `SELECT (SELECT value FROM service_keys WHERE name = 'encryption') AS generated, c.canary,
            CASE WHEN c.canary IS NULL THEN json_build_array(${storedColumns.map(sample).join(', ')}) END AS stored
     FROM (SELECT ${sample(canaryColumn)} AS canary) c`,
  );
  const { canary } = found;
  const witness = canary
    ? { column: canaryColumn, values: canary }
    : (found.stored ?? []).map((values, i) => values && { column: storedColumns[i], values }).find((w) => w);
  if (!config.SVC_ENCRYPTION_KEY && !found.generated && witness) {
    // Generating a key now would start a service that opens none of them.
    throw new StartupError(
      `SVC_ENCRYPTION_KEY is unset, but ${where} holds secrets sealed under a key; start with SVC_ENCRYPTION_KEY set to the key they were sealed with`,
    );
  }
  if (witness && !(await secrets.tryOpen(witness.values[0], witness.column.aad(toRow(witness.column, witness.values))))) {
    throw new StartupError(
      config.SVC_ENCRYPTION_KEY
        ? `SVC_ENCRYPTION_KEY does not open the secrets stored in ${where} (sealed under another key); start with the key they were sealed with, or list the old one in SVC_ENCRYPTION_KEY_PREVIOUS`
        : `SVC_ENCRYPTION_KEY is unset and the key generated in ${where} does not open the secrets stored there (sealed under another key); start with SVC_ENCRYPTION_KEY set to the key they were sealed with`,
    );
  }
  if (!canary) {
    const written: unknown[] = await db.query(`INSERT INTO service_keys (name, value) VALUES ($1, $2) ON CONFLICT (name) DO NOTHING RETURNING name`, [
      CANARY_NAME,
      await secrets.seal(CANARY_TEXT, CANARY_AAD),
    ]);
    // Another instance wrote it first, maybe under another key: checked against that one.
    if (!written.length) await checkEncryptionKey(secrets, db, config);
  }
}

export interface ResealCount {
  what: string;
  /** Rows holding a sealed value. */
  seen: number;
  /** Re-sealed under the current key (the rest were already). */
  resealed: number;
  /** Opened by no key: listed so the previous key is not dropped while they remain. */
  unreadable: number;
}

/**
 * Re-seals, under the current key, every stored value a previous key opens, `batch` rows at a
 * time in primary-key order. Idempotent: a value the current key opens is left alone. A row
 * changed meanwhile is skipped, since whatever wrote it sealed it under the current key.
 */
export async function resealAll(secrets: SecretBox, db: DataSource, batch = 500): Promise<ResealCount[]> {
  const counts: ResealCount[] = [];
  for (const c of SEALED_COLUMNS) {
    const count: ResealCount = { what: c.what, seen: 0, resealed: 0, unreadable: 0 };
    const keys = c.key.join(', ');
    let last: string[] | undefined;
    for (;;) {
      const rows: Array<Row & { sealed: string }> = await db.query(
        `SELECT ${c.key.map((k) => `${k}::text AS ${k}`).join(', ')}, ${c.value} AS sealed FROM ${c.table}
         WHERE ${c.where} ${last ? `AND (${keys}) > (${c.key.map((_, i) => `$${i + 1}`).join(', ')})` : ''}
         ORDER BY ${keys} LIMIT ${batch}`,
        last ?? [],
      );
      for (const row of rows) {
        count.seen++;
        const aad = c.aad(row);
        const opened = await secrets.tryOpen(row.sealed, aad);
        if (!opened) count.unreadable++;
        else if (!opened.current) {
          const [, changed]: [unknown, number] = await db.query(
            `UPDATE ${c.table} SET ${c.set} WHERE ${c.key.map((k, i) => `${k} = $${i + 2}`).join(' AND ')} AND ${c.value} = $${c.key.length + 2}`,
            [await secrets.seal(opened.plaintext, aad), ...c.key.map((k) => row[k]), row.sealed],
          );
          count.resealed += changed;
        }
      }
      if (rows.length < batch) break;
      last = c.key.map((k) => rows[rows.length - 1][k]);
    }
    counts.push(count);
  }
  return counts;
}
