/**
 * Owns the service's encryption key and what it encrypts at rest (webhook secrets, OAuth client
 * secrets and signing keys, connector tokens): AES-256-GCM with a full 16-byte tag,
 * `v1.<iv>.<tag>.<ciphertext>` in base64url, with associated data binding each ciphertext to its
 * row so it cannot be moved to another.
 *
 * The key is SVC_ENCRYPTION_KEY (required in production). Elsewhere, when it is unset, a
 * random key is generated once and kept in the `service_keys` table, so development data
 * survives restarts; such a key is only as safe as the database, which is why production
 * must bring its own.
 *
 * Rotation: values are sealed with the current key only and opened with it first, then with
 * each of SVC_ENCRYPTION_KEY_PREVIOUS; GCM's tag tells which key fits, so the `v1.` format needs
 * no key id. `npm run secrets:reseal` (reseal-secrets.ts) re-seals what an old key still opens.
 *
 * The key is checked at start (`verify`): a canary sealed under it is kept in `service_keys`,
 * and a key that opens neither the canary nor, before there is one, a value already stored is
 * refused, rather than starting a service whose every sealed value fails to open.
 */
import { Injectable } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import { createCipheriv, createDecipheriv, hkdfSync, randomBytes } from 'node:crypto';
import { DataSource } from 'typeorm';
import { AppConfig } from '../config/app-config';

const IV_BYTES = 12;
/** GCM's full tag. Node accepts a shorter one unless told its length, and 4 bytes are forged in 2^32 tries. */
export const GCM_TAG_BYTES = 16;

export function parseKey(text: string, name = 'SVC_ENCRYPTION_KEY'): Buffer {
  const key = /^[0-9a-fA-F]{64}$/.test(text) ? Buffer.from(text, 'hex') : Buffer.from(text, 'base64');
  if (key.length !== 32) throw new Error(`${name} must be 32 bytes`);
  return key;
}

/** SVC_ENCRYPTION_KEY_PREVIOUS: one key or a comma list of them, oldest last or in any order. */
export function parseKeyList(text: string | undefined): Buffer[] {
  return (text ?? '').split(',').map((k) => k.trim()).filter((k) => k !== '').map((k) => parseKey(k, 'SVC_ENCRYPTION_KEY_PREVIOUS'));
}

export function seal(key: Buffer, plaintext: string, aad: string): string {
  const iv = randomBytes(IV_BYTES);
  const cipher = createCipheriv('aes-256-gcm', key, iv);
  cipher.setAAD(Buffer.from(aad));
  const ciphertext = Buffer.concat([cipher.update(plaintext, 'utf8'), cipher.final()]);
  return ['v1', iv, cipher.getAuthTag(), ciphertext].map((p) => (typeof p === 'string' ? p : p.toString('base64url'))).join('.');
}

function openWithKey(key: Buffer, sealed: string, aad: string): string {
  const [version, iv, tag, ciphertext] = sealed.split('.');
  if (version !== 'v1') throw new Error(`unknown sealed format ${version}`);
  const decipher = createDecipheriv('aes-256-gcm', key, Buffer.from(iv, 'base64url'), { authTagLength: GCM_TAG_BYTES });
  decipher.setAAD(Buffer.from(aad));
  decipher.setAuthTag(Buffer.from(tag, 'base64url'));
  return Buffer.concat([decipher.update(Buffer.from(ciphertext, 'base64url')), decipher.final()]).toString('utf8');
}

/**
 * The plaintext and the index of the key (in `keys`, current first) that opened it. Throws the
 * first key's error when none does: a wrong key and a tampered value look alike to GCM.
 */
export function openAny(keys: readonly Buffer[], sealed: string, aad: string): { plaintext: string; keyIndex: number } {
  let first: unknown;
  for (const [keyIndex, key] of keys.entries()) {
    try {
      return { plaintext: openWithKey(key, sealed, aad), keyIndex };
    } catch (err) {
      first ??= err;
    }
  }
  throw first ?? new Error('no key to open with');
}

export function open(key: Buffer | readonly Buffer[], sealed: string, aad: string): string {
  return openAny(Buffer.isBuffer(key) ? [key] : key, sealed, aad).plaintext;
}

@Injectable()
export class SecretBox {
  /** Read on first use, not at start: a service started with MIGRATIONS_RUN=false may not have the table yet. */
  private keys?: Promise<Buffer[]>;

  constructor(
    private readonly config: AppConfig,
    @InjectDataSource() private readonly db: DataSource,
  ) {}

  /** Always under the current key. */
  async seal(plaintext: string, aad: string): Promise<string> {
    return seal((await this.loadKeys())[0], plaintext, aad);
  }

  /** With the current key, else with a previous one (SVC_ENCRYPTION_KEY_PREVIOUS). */
  async open(sealed: string, aad: string): Promise<string> {
    return openAny(await this.loadKeys(), sealed, aad).plaintext;
  }

  /** Opens `sealed`, telling whether the current key did (false: a previous one), or undefined when no key does. */
  async tryOpen(sealed: string, aad: string): Promise<{ plaintext: string; current: boolean } | undefined> {
    const keys = await this.loadKeys();
    try {
      const { plaintext, keyIndex } = openAny(keys, sealed, aad);
      return { plaintext, current: keyIndex === 0 };
    } catch {
      return undefined;
    }
  }

  /** A key for another purpose (cookie signing, say), derived from the service key with HKDF. */
  async derive(purpose: string): Promise<Buffer> {
    return (await this.deriveAll(purpose))[0];
  }

  /** The same derived from the current key, then from each previous one: what was made under an old key still opens. */
  async deriveAll(purpose: string): Promise<Buffer[]> {
    return (await this.loadKeys()).map((key) => Buffer.from(hkdfSync('sha256', key, Buffer.alloc(0), `svc:${purpose}`, 32)));
  }

  private loadKeys(): Promise<Buffer[]> {
    this.keys ??= this.readKey().then((current) => [current, ...parseKeyList(this.config.SVC_ENCRYPTION_KEY_PREVIOUS)]);
    this.keys.catch(() => (this.keys = undefined));
    return this.keys;
  }

  private async readKey(): Promise<Buffer> {
    if (this.config.SVC_ENCRYPTION_KEY) return parseKey(this.config.SVC_ENCRYPTION_KEY);
    // Two instances starting at once agree on one key: the first insert wins, both read it back.
    await this.db.query(`INSERT INTO service_keys (name, value) VALUES ('encryption', $1) ON CONFLICT (name) DO NOTHING`, [
      randomBytes(32).toString('base64'),
    ]);
    const [row] = await this.db.query(`SELECT value FROM service_keys WHERE name = 'encryption'`);
    return parseKey(row.value);
  }
}
