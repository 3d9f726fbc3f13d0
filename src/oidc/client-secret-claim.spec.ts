import type { Client } from 'oidc-provider';
import { clientCredentialId, clientOfCredential, currentClaim, goodUntil, issuedUnderCurrentSecret, KEY_CLAIM, livePreviousSecret, SECRET_CLAIM } from './client-secret-claim';
import { PREVIOUS_SECRET, PREVIOUS_SECRET_ENDS } from './oidc-adapter';

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

  it('keeps a token of the previous secret good until its overlap ends, and no longer; its credential likewise', () => {
    const before = client({ clientSecret: 'svc_cs_old' });
    const after = client({ clientSecret: 'svc_cs_new' });
    const issued = token(currentClaim(before)!);
    const credential = clientOfCredential(clientCredentialId('app', issued.extra[SECRET_CLAIM]));
    const previous = { secret: 'svc_cs_old', endsAt: 2_000 };
    expect(goodUntil(after, issued, previous, 1_000)).toBe(2_000);
    expect(goodUntil(after, issued, previous, 2_000)).toBeUndefined();
    expect(goodUntil(after, issued, { secret: 'svc_cs_other', endsAt: 2_000 }, 1_000)).toBeUndefined();
    expect(goodUntil(after, token(currentClaim(after)!), previous, 1_000)).toBe(Infinity);
    expect(credential.isCurrent(after)).toBe(false);
    expect(credential.isPrevious(previous, 1_000)).toBe(true);
    expect(credential.isPrevious(previous, 2_000)).toBe(false);
    expect(clientOfCredential('client:app').isPrevious(previous, 1_000)).toBe(false);
  });

  it('reads a stored previous secret only while its overlap lasts', () => {
    const stored = { [PREVIOUS_SECRET]: 'svc_cs_old', [PREVIOUS_SECRET_ENDS]: 2_000 };
    expect(livePreviousSecret(stored, 1_000)).toEqual({ secret: 'svc_cs_old', endsAt: 2_000 });
    expect(livePreviousSecret(stored, 2_000)).toBeUndefined();
    expect(livePreviousSecret({}, 1_000)).toBeUndefined();
  });
});
