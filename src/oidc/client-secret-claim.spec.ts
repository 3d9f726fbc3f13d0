import type { Client } from 'oidc-provider';
import { clientCredentialId, clientOfCredential, currentClaim, issuedUnderCurrentSecret, KEY_CLAIM, SECRET_CLAIM } from './client-secret-claim';

const client = (metadata: { clientSecret?: string; jwksUri?: string }) => ({ clientId: 'app', ...metadata }) as unknown as Client;
const token = (extra: Record<string, string>) => ({ extra });

describe('the claim a client-credentials token keeps', () => {
  it('is the secret\'s for a client with one, and ends with a rotation', () => {
    const before = client({ clientSecret: 'svc_cs_old' });
    const issued = token(currentClaim(before)!);
    expect(Object.keys(issued.extra)).toEqual([SECRET_CLAIM]);
    expect(issuedUnderCurrentSecret(before, issued)).toBe(true);
    expect(issuedUnderCurrentSecret(client({ clientSecret: 'svc_cs_new' }), issued)).toBe(false);
  });

  it('is the key set\'s for a private_key_jwt client, under a claim of its own, and ends when its jwks_uri moves', () => {
    const before = client({ jwksUri: 'https://keys.example/a' });
    const issued = token(currentClaim(before)!);
    // An earlier release reads SECRET_CLAIM only: a token without it is current there.
    expect(Object.keys(issued.extra)).toEqual([KEY_CLAIM]);
    expect(issuedUnderCurrentSecret(before, issued)).toBe(true);
    expect(issuedUnderCurrentSecret(client({ jwksUri: 'https://keys.example/b' }), issued)).toBe(false);
    // Its credential stays bare, which every release takes as current.
    expect(clientCredentialId('app', issued.extra[SECRET_CLAIM])).toBe('client:app');
    expect(clientOfCredential('client:app').isCurrent(before)).toBe(true);
  });

  it('takes a token from before the claims as current, and no other claim for one it does not hold', () => {
    expect(issuedUnderCurrentSecret(client({ clientSecret: 's' }), token({}))).toBe(true);
    expect(issuedUnderCurrentSecret(client({ clientSecret: 's' }), token({ [KEY_CLAIM]: 'x' }))).toBe(false);
  });
});
