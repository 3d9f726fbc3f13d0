import { thrownApiError } from '../../test/support/thrown';
import { ApiError } from '../common/api-error';
import { canonicalJson, parseIdempotencyKey, requestFingerprint } from './idempotency-key';
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

  it('seals a response so only the same key, owner, row and status open it', () => {
    const owner = { tenantId: 't', credentialId: 'c' };
    const sealed = sealResponse('idem', owner, 'digest', 201, '{"key":"svc_k1_secret"}');
    expect(sealed.includes(Buffer.from('svc_k1_secret'))).toBe(false);
    expect(openResponse('idem', owner, 'digest', 201, sealed)).toBe('{"key":"svc_k1_secret"}');
    expect(() => openResponse('other', owner, 'digest', 201, sealed)).toThrow();
    expect(() => openResponse('idem', { ...owner, credentialId: 'd' }, 'digest', 201, sealed)).toThrow();
    expect(() => openResponse('idem', owner, 'digest', 200, sealed)).toThrow();
  });
});
