import { bucketFor, isBrowserPage, TIGHT_LIMIT, tokenRequestRule } from './rate-limit.policy';

describe('bucketFor', () => {
  it('segments by the first path component, reads and writes apart', () => {
    expect(bucketFor('POST', '/items', 100)).toEqual({ bucket: 'items:w', limit: 100 });
    expect(bucketFor('GET', '/items/abc/versions', 100)).toEqual({ bucket: 'items:r', limit: 200 });
    expect(bucketFor('PATCH', '/items/abc', 100).bucket).toBe('items:w');
    expect(bucketFor('DELETE', '/items/abc', 100).bucket).toBe('items:w');
    expect(bucketFor('POST', '/edges', 100).bucket).toBe('edges:w');
    expect(bucketFor('GET', '/', 100)).toEqual({ bucket: 'root:r', limit: 200 });
  });

  it('gives GET, HEAD and OPTIONS twice the base limit', () => {
    for (const method of ['GET', 'HEAD', 'OPTIONS', 'get']) expect(bucketFor(method, '/search', 7).limit).toBe(14);
    for (const method of ['POST', 'PUT', 'PATCH', 'DELETE']) expect(bucketFor(method, '/search', 7).limit).toBe(7);
  });

  it('caps /keys at the tight limit whatever the base, and below a smaller base', () => {
    expect(bucketFor('POST', '/keys', 1000)).toEqual({ bucket: 'keys:w', limit: TIGHT_LIMIT });
    expect(bucketFor('GET', '/keys/abc', 1000)).toEqual({ bucket: 'keys:r', limit: TIGHT_LIMIT * 2 });
    expect(bucketFor('POST', '/keys', TIGHT_LIMIT).limit).toBe(TIGHT_LIMIT - 1);
    expect(bucketFor('POST', '/keys', 5).limit).toBe(4);
    expect(tokenRequestRule(5).limit).toBe(4);
    expect(bucketFor('POST', '/keys', 1).limit).toBe(1);
    expect(bucketFor('POST', '/KEYS', 1000)).toEqual({ bucket: 'keys:w', limit: TIGHT_LIMIT });
  });

  it('puts every token endpoint in one bucket per address at the base limit, apart from the rest of /auth; their tight cap is counted by the provider', () => {
    // oidc-mount.ts serves `/auth/token//` too: it drops every trailing slash.
    for (const path of ['/auth/token', '/auth/oauth2/token', '/auth/device/token', '/auth/token/', '/auth/token//', '/AUTH/TOKEN', '/auth/OAuth2/Token']) {
      expect(bucketFor('POST', path, 1000)).toEqual({ bucket: 'auth-token-all:w', limit: 1000, oauth: true, perIp: true });
    }
    // Which requests it counts is the provider's to tell (src/oidc/token-rate-limit.ts): not a device's polls.
    expect(tokenRequestRule(1000)).toEqual({ bucket: 'auth-token:w', limit: TIGHT_LIMIT, oauth: true, perIp: true });
    expect(tokenRequestRule(TIGHT_LIMIT).limit).toBe(TIGHT_LIMIT - 1);
    expect(bucketFor('GET', '/auth/authorize', 1000)).toEqual({ bucket: 'auth:r', limit: 2000 });
    expect(bucketFor('POST', '/auth/tokens', 1000)).toEqual({ bucket: 'auth:w', limit: 1000 });
  });

  it('caps the password forms in a tight bucket of their own, not their pages', () => {
    for (const path of ['/auth/sign-in', '/auth/sign-up', '/auth/device/consent', '/AUTH/Sign-In/']) {
      expect(bucketFor('POST', path, 1000)).toEqual({ bucket: 'auth-password:w', limit: TIGHT_LIMIT, perIp: true });
    }
    expect(bucketFor('GET', '/auth/sign-in', 1000)).toEqual({ bucket: 'auth:r', limit: 2000 });
  });

  it('caps the account page\'s key form as /keys, per address, in a bucket of its own', () => {
    for (const path of ['/auth/keys', '/auth/keys/', '/AUTH/Keys']) {
      expect(bucketFor('POST', path, 1000)).toEqual({ bucket: 'auth-keys:w', limit: TIGHT_LIMIT, perIp: true });
    }
    expect(bucketFor('POST', '/auth/keys', 5).limit).toBe(4);
    expect(bucketFor('POST', '/auth/keys/x', 1000)).toEqual({ bucket: 'auth:w', limit: 1000 });
  });

  it('caps open client registration per address, in a bucket of its own; not the RFC 7592 read', () => {
    for (const path of ['/auth/oauth2/register', '/AUTH/OAuth2/Register/']) {
      expect(bucketFor('POST', path, 1000)).toEqual({ bucket: 'auth-register:w', limit: TIGHT_LIMIT, oauth: true, perIp: true });
    }
    expect(bucketFor('POST', '/auth/oauth2/register', 5).limit).toBe(4);
    expect(bucketFor('GET', '/auth/oauth2/register/some-client', 1000)).toEqual({ bucket: 'auth:r', limit: 2000 });
  });

  it('caps the device page, where user codes are looked up, per address in a bucket of its own; not the device authorization', () => {
    for (const method of ['GET', 'HEAD']) {
      for (const path of ['/auth/device', '/AUTH/Device/']) expect(bucketFor(method, path, 1000)).toEqual({ bucket: 'auth-device:r', limit: 2 * TIGHT_LIMIT, perIp: true });
    }
    expect(bucketFor('POST', '/auth/device', 1000)).toEqual({ bucket: 'auth:w', limit: 1000, oauth: true });
  });

  it('marks the OAuth protocol endpoints, and only those', () => {
    for (const path of ['/auth/oauth2/token', '/auth/token', '/auth/device/token', '/auth/oauth2/revoke', '/auth/oauth2/introspect', '/auth/oauth2/register', '/auth/userinfo', '/Auth/OAuth2/UserInfo']) {
      expect(bucketFor('POST', path, 100).oauth).toBe(true);
    }
    expect(bucketFor('POST', '/auth/device', 100).oauth).toBe(true);
    for (const [method, path] of [['GET', '/auth/device'], ['POST', '/auth/sign-in'], ['GET', '/auth/authorize'], ['POST', '/keys'], ['GET', '/auth/grants']]) {
      expect(bucketFor(method, path, 100).oauth).toBeUndefined();
    }
  });

  it('tells the browser pages and their forms, which refuse a browser with a page, from the API and the provider\'s endpoints', () => {
    const pages = [['GET', '/auth/sign-in'], ['POST', '/AUTH/Sign-In/'], ['POST', '/auth/sign-up'], ['GET', '/auth/device'], ['POST', '/auth/device/consent'], ['GET', '/auth/grants'], ['POST', '/auth/grants/:id/revoke'], ['POST', '/auth/sessions/revoke'], ['GET', '/auth/security'], ['POST', '/auth/keys'], ['GET', '/auth/oauth2/authorize'], ['GET', '/auth']];
    for (const [method, path] of pages) expect([method, path, isBrowserPage(method, path)]).toEqual([method, path, true]);
    const api = [['POST', '/auth/device'], ['POST', '/auth/token'], ['POST', '/auth/oauth2/token'], ['GET', '/auth/grants/:id'], ['GET', '/auth/userinfo'], ['POST', '/keys'], ['GET', '/items'], ['GET', '/auth/signin']];
    for (const [method, path] of api) expect([method, path, isBrowserPage(method, path)]).toEqual([method, path, false]);
  });
});
