/**
 * Stored responses are sealed (AES-256-GCM) under a key derived from the service's key
 * (SecretBox) together with the client's Idempotency-Key, which the table holds only as a
 * SHA-256. Replays must return the first body exactly, and some first bodies carry secrets shown
 * once (the plaintext `key` of POST /keys, a webhook's `secret`, a rotated client secret):
 * sealing keeps those out of the database in readable form, while the client that holds the
 * Idempotency-Key can still get its response back. Both keys are needed: the SHA-256 of a
 * guessable header value (`order-123`) can be reversed by trying, so the header alone must not
 * open a row (before v2 it did), and the service key alone opens no row either.
 *
 * Format v2: `0x02 | iv | tag | ciphertext`. Rows sealed before (`iv | tag | ciphertext`, under the
 * header alone) are still opened until they expire (IDEMPOTENCY_TTL_HOURS after they were kept).
 */
import { Injectable } from '@nestjs/common';
import { createCipheriv, createDecipheriv, hkdfSync, randomBytes } from 'node:crypto';
import { GCM_TAG_BYTES, SecretBox } from '../crypto/secret-box';
import type { KeyOwner } from './idempotency-key';

const V2 = 0x02;
const IV_BYTES = 12;
const TAG_BYTES = GCM_TAG_BYTES;

/** `serverKey` undefined: the v1 derivation, from the header alone, for rows kept before v2. */
function sealingKey(serverKey: Buffer | undefined, idempotencyKey: string, owner: KeyOwner): Buffer {
  const salt = `${owner.tenantId}:${owner.credentialId}`;
  if (!serverKey) return Buffer.from(hkdfSync('sha256', idempotencyKey, salt, 'svc idempotency response v1', 32));
  return Buffer.from(hkdfSync('sha256', Buffer.concat([serverKey, Buffer.from(idempotencyKey, 'utf8')]), salt, 'svc idempotency response v2', 32));
}

/** Binds the ciphertext to its row and status, so a sealed body cannot be moved to another. */
function associatedData(owner: KeyOwner, keyDigest: string, status: number): Buffer {
  return Buffer.from(`${owner.tenantId}\n${owner.credentialId}\n${keyDigest}\n${status}`);
}

/** The body's JSON text (empty text for no body), sealed in format v2. */
export function sealResponse(serverKey: Buffer, idempotencyKey: string, owner: KeyOwner, keyDigest: string, status: number, json: string): Buffer {
  const iv = randomBytes(IV_BYTES);
  const cipher = createCipheriv('aes-256-gcm', sealingKey(serverKey, idempotencyKey, owner), iv);
  cipher.setAAD(associatedData(owner, keyDigest, status));
  const ciphertext = Buffer.concat([cipher.update(json, 'utf8'), cipher.final()]);
  return Buffer.concat([Buffer.of(V2), iv, cipher.getAuthTag(), ciphertext]);
}

function openSealed(key: Buffer, owner: KeyOwner, keyDigest: string, status: number, sealed: Buffer): string {
  const decipher = createDecipheriv('aes-256-gcm', key, sealed.subarray(0, IV_BYTES), { authTagLength: TAG_BYTES });
  decipher.setAAD(associatedData(owner, keyDigest, status));
  decipher.setAuthTag(sealed.subarray(IV_BYTES, IV_BYTES + TAG_BYTES));
  return Buffer.concat([decipher.update(sealed.subarray(IV_BYTES + TAG_BYTES)), decipher.final()]).toString('utf8');
}

export function openResponse(serverKey: Buffer, idempotencyKey: string, owner: KeyOwner, keyDigest: string, status: number, sealed: Buffer): string {
  if (sealed[0] === V2 && sealed.length >= 1 + IV_BYTES + TAG_BYTES) {
    try {
      return openSealed(sealingKey(serverKey, idempotencyKey, owner), owner, keyDigest, status, sealed.subarray(1));
    } catch {
      // A v1 row whose random IV happens to start with the version byte: tried as v1 below.
    }
  }
  return openSealed(sealingKey(undefined, idempotencyKey, owner), owner, keyDigest, status, sealed);
}

/** Seals and opens kept responses with the service's key, derived once. */
@Injectable()
export class ResponseSeal {
  private serverKeys?: Promise<Buffer[]>;

  constructor(private readonly secrets: SecretBox) {}

  async seal(idempotencyKey: string, owner: KeyOwner, keyDigest: string, status: number, json: string): Promise<Buffer> {
    return sealResponse(await this.key(), idempotencyKey, owner, keyDigest, status, json);
  }

  /** Under the current key's derivation, else a previous key's (SVC_ENCRYPTION_KEY_PREVIOUS): these rows cannot be re-sealed. */
  async open(idempotencyKey: string, owner: KeyOwner, keyDigest: string, status: number, sealed: Buffer): Promise<string> {
    const [current, ...previous] = await this.keys();
    try {
      return openResponse(current, idempotencyKey, owner, keyDigest, status, sealed);
    } catch (err) {
      for (const key of previous) {
        try {
          return openResponse(key, idempotencyKey, owner, keyDigest, status, sealed);
        } catch {
          // the next one
        }
      }
      throw err;
    }
  }

  private async key(): Promise<Buffer> {
    return (await this.keys())[0];
  }

  private keys(): Promise<Buffer[]> {
    this.serverKeys ??= this.secrets.deriveAll('idempotency-response');
    this.serverKeys.catch(() => (this.serverKeys = undefined));
    return this.serverKeys;
  }
}
