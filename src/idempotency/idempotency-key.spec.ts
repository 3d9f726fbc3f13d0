import { createCipheriv, createDecipheriv, hkdfSync, randomBytes } from 'node:crypto';
import { thrownApiError } from '../../test/support/thrown';
import { ApiError } from '../common/api-error';
import { canonicalJson } from '../common/canonical-json';
import { parseIdempotencyKey, requestFingerprint } from './idempotency-key';
import { openResponse, sealResponse } from './response-seal';

describe('idempotency key rules', () => {
  it('accepts 1-255 visible ASCII characters only', () => {
    expect(parseIdempotencyKey('a')).toBe('a');
    expect(parseIdempotencyKey('~'.repeat(255))).toBe('~'.repeat(255));
    for (const bad of ['', ' ', 'a b', 'x'.repeat(256), 'é', 'tab\there', ['a', 'b']]) {
      const error = thrownApiError(() => parseIdempotencyKey(bad));
      expect(error).toBeInstanceOf(ApiError);
      expect(error?.code).toBe('validation_error');
      expect(error?.details).toEqual({ fields: [expect.objectContaining({ field: 'Idempotency-Key' })] });
    }
  });

  it('fingerprints the body independently of key order, but not of values, method or URL', () => {
    expect(canonicalJson({ b: 1, a: { d: [2, { z: 1, y: 2 }], c: null } })).toBe('{"a":{"c":null,"d":[2,{"y":2,"z":1}]},"b":1}');
    const f = requestFingerprint('POST', '/keys', { a: 1, b: 2 });
    expect(requestFingerprint('post', '/keys', { b: 2, a: 1 })).toBe(f);
    expect(requestFingerprint('POST', '/keys', { a: 1, b: 3 })).not.toBe(f);
    expect(requestFingerprint('POST', '/keys?x=1', { a: 1, b: 2 })).not.toBe(f);
    expect(requestFingerprint('PUT', '/keys', { a: 1, b: 2 })).not.toBe(f);
    expect(requestFingerprint('POST', '/keys', undefined)).not.toBe(requestFingerprint('POST', '/keys', {}));
    // An OAuth token's scopes, in any order; an API key (null) fingerprints as before they counted.
    const scoped = requestFingerprint('POST', '/keys', { a: 1, b: 2 }, ['b:read', 'a:write']);
    expect(requestFingerprint('POST', '/keys', { a: 1, b: 2 }, ['a:write', 'b:read'])).toBe(scoped);
    expect(requestFingerprint('POST', '/keys', { a: 1, b: 2 }, ['a:write'])).not.toBe(scoped);
    expect(requestFingerprint('POST', '/keys', { a: 1, b: 2 }, [])).not.toBe(f);
    expect(requestFingerprint('POST', '/keys', { a: 1, b: 2 }, null)).toBe(f);
  });

  it('seals a response so only the service key with the same Idempotency-Key, owner, row and status open it', () => {
    const owner = { tenantId: 't', credentialId: 'c' };
    const server = randomBytes(32);
    const sealed = sealResponse(server, 'idem', owner, 'digest', 201, '{"key":"svc_k1_secret"}');
    expect(sealed.includes(Buffer.from('svc_k1_secret'))).toBe(false);
    expect(openResponse(server, 'idem', owner, 'digest', 201, sealed)).toBe('{"key":"svc_k1_secret"}');
    expect(() => openResponse(server, 'other', owner, 'digest', 201, sealed)).toThrow();
    expect(() => openResponse(server, 'idem', { ...owner, credentialId: 'd' }, 'digest', 201, sealed)).toThrow();
    expect(() => openResponse(server, 'idem', owner, 'digest', 200, sealed)).toThrow();
    // The header alone, guessed from its SHA-256 in the table, opens nothing without the service key.
    expect(() => openResponse(randomBytes(32), 'idem', owner, 'digest', 201, sealed)).toThrow();
    expect(() => openV1(sealed.subarray(1), 'idem', owner, 'digest', 201)).toThrow();
  });

  it('still opens a response kept before the service key took part (v1, under the header alone)', () => {
    const owner = { tenantId: 't', credentialId: 'c' };
    for (let i = 0; i < 20; i++) {
      // Some of them with an IV whose first byte is the v2 marker.
      const iv = randomBytes(12);
      if (i % 2) iv[0] = 0x02;
      // An empty body too (28 bytes: shorter than any v2 row).
      const json = i % 4 < 2 ? '{"n":1}' : '';
      const v1 = sealV1(iv, 'idem', owner, 'digest', 201, json);
      expect(openResponse(randomBytes(32), 'idem', owner, 'digest', 201, v1)).toBe(json);
    }
  });
});

/** The v1 format (before the service key took part), as rows kept then hold it. */
const v1Key = (idem: string, owner: { tenantId: string; credentialId: string }) =>
  Buffer.from(hkdfSync('sha256', idem, `${owner.tenantId}:${owner.credentialId}`, 'svc idempotency response v1', 32));
const v1Aad = (owner: { tenantId: string; credentialId: string }, digest: string, status: number) => Buffer.from(`${owner.tenantId}\n${owner.credentialId}\n${digest}\n${status}`);

function sealV1(iv: Buffer, idem: string, owner: { tenantId: string; credentialId: string }, digest: string, status: number, json: string): Buffer {
  const cipher = createCipheriv('aes-256-gcm', v1Key(idem, owner), iv);
  cipher.setAAD(v1Aad(owner, digest, status));
  const ciphertext = Buffer.concat([cipher.update(json, 'utf8'), cipher.final()]);
  return Buffer.concat([iv, cipher.getAuthTag(), ciphertext]);
}

function openV1(sealed: Buffer, idem: string, owner: { tenantId: string; credentialId: string }, digest: string, status: number): string {
  const decipher = createDecipheriv('aes-256-gcm', v1Key(idem, owner), sealed.subarray(0, 12));
  decipher.setAAD(v1Aad(owner, digest, status));
  decipher.setAuthTag(sealed.subarray(12, 28));
  return Buffer.concat([decipher.update(sealed.subarray(28)), decipher.final()]).toString('utf8');
}
