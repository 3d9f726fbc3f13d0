import { createHmac, randomBytes } from 'node:crypto';
import { Webhook } from 'standardwebhooks';
import Stripe from 'stripe';
import { chosenSecretProblem, generateSecret, signDelivery } from './signature';

const BASE64 = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/';

describe('webhook signatures', () => {
  const body = '{"event":"item.created","item":{"id":"x"}}';

  it('generates whsec_ secrets of 32 random bytes', () => {
    const a = generateSecret();
    expect(a).toMatch(/^whsec_[A-Za-z0-9+/]{43}=$/);
    expect(Buffer.from(a.slice(6), 'base64')).toHaveLength(32);
    expect(generateSecret()).not.toBe(a);
  });

  it('signs `<t>.<body>` with the secret text (SPEC 6.2), and the Standard Webhooks content with its key', () => {
    const secret = generateSecret();
    const h = signDelivery([secret], 'evt_1', body, 1_700_000_000);
    expect(h['X-Svc-Signature']).toBe(`t=1700000000,v1=${createHmac('sha256', secret).update(`1700000000.${body}`).digest('hex')}`);
    expect([h['webhook-id'], h['webhook-timestamp']]).toEqual(['evt_1', '1700000000']);
    const verifier = new Webhook(secret);
    // The library checks the timestamp against now; sign with now for that part.
    const now = Math.floor(Date.now() / 1000);
    expect(verifier.verify(body, signDelivery([secret], 'evt_1', body, now) as unknown as Record<string, string>)).toEqual(JSON.parse(body));
  });

  it('uses a secret of another form as raw bytes for Standard Webhooks', () => {
    const secret = 'my own secret of 24 chars!';
    const now = Math.floor(Date.now() / 1000);
    const h = signDelivery([secret], 'evt_2', body, now) as unknown as Record<string, string>;
    expect(new Webhook(secret, { format: 'raw' }).verify(body, h)).toEqual(JSON.parse(body));
  });

  it('takes a chosen whsec_ secret only as Standard Webhooks libraries decode it, 24-64 bytes in padded base64, which they then verify unchanged', () => {
    const now = Math.floor(Date.now() / 1000);
    const verifies = (secret: string) => {
      try {
        return new Webhook(secret).verify(body, signDelivery([secret], 'evt_4', body, now) as unknown as Record<string, string>) !== undefined;
      } catch {
        return false;
      }
    };
    const taken = [generateSecret(), `whsec_${randomBytes(24).toString('base64')}`, `whsec_${randomBytes(64).toString('base64')}`, `whsec_${randomBytes(40).toString('base64')}`];
    for (const secret of taken) expect([secret, chosenSecretProblem(secret), verifies(secret)]).toEqual([secret, undefined, true]);
    // The audit's two: signed as raw bytes, which `new Webhook(secret)` cannot even construct from.
    for (const secret of ['whsec_abc-def_ghijklmnopqrstu', 'whsec_my.webhook.secret-2026']) {
      expect(chosenSecretProblem(secret)).toMatch(/^starts with whsec_, so Standard Webhooks libraries decode the rest as base64/);
      expect(() => new Webhook(secret)).toThrow(/Base64Coder/);
    }
    const key32 = randomBytes(32).toString('base64');
    const refused = [
      `whsec_${randomBytes(16).toString('base64')}`, // too short a key for some libraries
      `whsec_${randomBytes(65).toString('base64')}`, // too long for them
      `whsec_${key32.replace(/=+$/, '')}`, // unpadded: Python's and Go's decoders refuse it
      // Stray bits in the last character: the same key to Node, another string to stricter decoders.
      `whsec_${key32.slice(0, 42)}${BASE64[BASE64.indexOf(key32[42]) + 1]}=`,
      `whsec_${randomBytes(30).toString('base64url')}-_`, // base64url
    ];
    for (const secret of refused) expect(chosenSecretProblem(secret)).toBeDefined();
    // A secret in any other form is the caller's to use raw (and the libraries' `format: "raw"`).
    for (const secret of ['my own secret of 24 chars!', 'WHSEC_not-base64-at-all', 'whsec-0123456789abcdef']) expect(chosenSecretProblem(secret)).toBeUndefined();
  });

  it('keeps signing a stored whsec_ secret that is not base64 (chosen before the rule) with its raw bytes', () => {
    const secret = 'whsec_my.webhook.secret-2026';
    const now = Math.floor(Date.now() / 1000);
    const h = signDelivery([secret], 'evt_5', body, now) as unknown as Record<string, string>;
    expect(new Webhook(secret, { format: 'raw' }).verify(body, h)).toEqual(JSON.parse(body));
  });

  it('signs with each secret while a rotated-out one is honoured: both verifier families accept either, and no other', () => {
    const [current, previous, other] = [generateSecret(), generateSecret(), generateSecret()];
    const now = Math.floor(Date.now() / 1000);
    const h = signDelivery([current, previous], 'evt_3', body, now);
    expect(h['X-Svc-Signature']).toMatch(/^t=\d+,v1=[0-9a-f]{64},v1=[0-9a-f]{64}$/);
    expect(h['webhook-signature']).toMatch(/^v1,\S+ v1,\S+$/);
    const stripe = new Stripe('sk_test_unused');
    for (const secret of [current, previous]) {
      expect(stripe.webhooks.constructEvent(body, h['X-Svc-Signature'], secret)).toEqual(JSON.parse(body));
      expect(new Webhook(secret).verify(body, h as unknown as Record<string, string>)).toEqual(JSON.parse(body));
    }
    expect(() => stripe.webhooks.constructEvent(body, h['X-Svc-Signature'], other)).toThrow();
    expect(() => new Webhook(other).verify(body, h as unknown as Record<string, string>)).toThrow();
  });
});
