import { createHmac } from 'node:crypto';
import { Webhook } from 'standardwebhooks';
import Stripe from 'stripe';
import { generateSecret, signDelivery } from './signature';

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
