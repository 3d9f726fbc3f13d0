/**
 * Stored responses are sealed (AES-256-GCM) under a key derived from the client's
 * Idempotency-Key, which the table holds only as a SHA-256. Replays must return the first
 * body exactly, and some first bodies carry secrets shown once (the plaintext `key` of
 * POST /keys, a webhook's `secret`): sealing keeps those out of the database in readable
 * form, while the client that holds the Idempotency-Key can still get its response back.
 * The protection is as strong as the Idempotency-Key is hard to guess: use random UUIDs.
 */
import { createCipheriv, createDecipheriv, hkdfSync, randomBytes } from 'node:crypto';
import type { KeyOwner } from './idempotency-key';

const INFO = 'svc idempotency response v1';
const IV_BYTES = 12;
const TAG_BYTES = 16;

function sealingKey(idempotencyKey: string, owner: KeyOwner): Buffer {
  return Buffer.from(hkdfSync('sha256', idempotencyKey, `${owner.tenantId}:${owner.credentialId}`, INFO, 32));
}

/** Binds the ciphertext to its row and status, so a sealed body cannot be moved to another. */
function associatedData(owner: KeyOwner, keyDigest: string, status: number): Buffer {
  return Buffer.from(`${owner.tenantId}\n${owner.credentialId}\n${keyDigest}\n${status}`);
}

/** `iv | tag | ciphertext` of the body's JSON text (empty text for no body). */
export function sealResponse(idempotencyKey: string, owner: KeyOwner, keyDigest: string, status: number, json: string): Buffer {
  const iv = randomBytes(IV_BYTES);
  const cipher = createCipheriv('aes-256-gcm', sealingKey(idempotencyKey, owner), iv);
  cipher.setAAD(associatedData(owner, keyDigest, status));
  const ciphertext = Buffer.concat([cipher.update(json, 'utf8'), cipher.final()]);
  return Buffer.concat([iv, cipher.getAuthTag(), ciphertext]);
}

export function openResponse(idempotencyKey: string, owner: KeyOwner, keyDigest: string, status: number, sealed: Buffer): string {
  const decipher = createDecipheriv('aes-256-gcm', sealingKey(idempotencyKey, owner), sealed.subarray(0, IV_BYTES));
  decipher.setAAD(associatedData(owner, keyDigest, status));
  decipher.setAuthTag(sealed.subarray(IV_BYTES, IV_BYTES + TAG_BYTES));
  return Buffer.concat([decipher.update(sealed.subarray(IV_BYTES + TAG_BYTES)), decipher.final()]).toString('utf8');
}
