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
 */
import { Injectable } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import { createCipheriv, createDecipheriv, hkdfSync, randomBytes } from 'node:crypto';
import { DataSource } from 'typeorm';
import { AppConfig } from '../config/app-config';

const IV_BYTES = 12;
/** GCM's full tag. Node accepts a shorter one unless told its length, and 4 bytes are forged in 2^32 tries. */
export const GCM_TAG_BYTES = 16;

export function parseKey(text: string): Buffer {
  const key = /^[0-9a-fA-F]{64}$/.test(text) ? Buffer.from(text, 'hex') : Buffer.from(text, 'base64');
  if (key.length !== 32) throw new Error('SVC_ENCRYPTION_KEY must be 32 bytes');
  return key;
}

export function seal(key: Buffer, plaintext: string, aad: string): string {
  const iv = randomBytes(IV_BYTES);
  const cipher = createCipheriv('aes-256-gcm', key, iv);
  cipher.setAAD(Buffer.from(aad));
  const ciphertext = Buffer.concat([cipher.update(plaintext, 'utf8'), cipher.final()]);
  return ['v1', iv, cipher.getAuthTag(), ciphertext].map((p) => (typeof p === 'string' ? p : p.toString('base64url'))).join('.');
}

export function open(key: Buffer, sealed: string, aad: string): string {
  const [version, iv, tag, ciphertext] = sealed.split('.');
  if (version !== 'v1') throw new Error(`unknown sealed format ${version}`);
  const decipher = createDecipheriv('aes-256-gcm', key, Buffer.from(iv, 'base64url'), { authTagLength: GCM_TAG_BYTES });
  decipher.setAAD(Buffer.from(aad));
  decipher.setAuthTag(Buffer.from(tag, 'base64url'));
  return Buffer.concat([decipher.update(Buffer.from(ciphertext, 'base64url')), decipher.final()]).toString('utf8');
}

@Injectable()
export class SecretBox {
  /** Read on first use, not at start: a service started with MIGRATIONS_RUN=false may not have the table yet. */
  private key?: Promise<Buffer>;

  constructor(
    private readonly config: AppConfig,
    @InjectDataSource() private readonly db: DataSource,
  ) {}

  async seal(plaintext: string, aad: string): Promise<string> {
    return seal(await this.loadKey(), plaintext, aad);
  }

  async open(sealed: string, aad: string): Promise<string> {
    return open(await this.loadKey(), sealed, aad);
  }

  /** A key for another purpose (cookie signing, say), derived from the service key with HKDF. */
  async derive(purpose: string): Promise<Buffer> {
    return Buffer.from(hkdfSync('sha256', await this.loadKey(), Buffer.alloc(0), `svc:${purpose}`, 32));
  }

  private loadKey(): Promise<Buffer> {
    this.key ??= this.readKey();
    this.key.catch(() => (this.key = undefined));
    return this.key;
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
