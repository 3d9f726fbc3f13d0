/**
 * Webhook secrets and signatures. One secret serves two verifier families:
 * - SPEC 6.2 `X-Svc-Signature: t=<unix>,v1=<hex>`: HMAC-SHA256 keyed with the secret's text over
 *   `<t>.<raw body>`; the same scheme as Stripe's, so `stripe.webhooks.constructEvent` verifies it.
 * - Standard Webhooks (`webhook-id`, `webhook-timestamp`, `webhook-signature: v1,<base64>`):
 *   HMAC-SHA256 over `<id>.<t>.<raw body>` keyed with the base64 part of a `whsec_` secret
 *   (a secret of another form is used as raw bytes, the libraries' `format: "raw"`). A secret
 *   a caller chooses that starts with `whsec_` must be one those libraries can decode
 *   (`chosenSecretProblem`); one stored before that rule that is not is still used as raw bytes.
 * Every attempt is signed afresh, so a retry carries its own timestamp. While a rotated-out
 * secret is still honoured, a delivery carries a signature by each secret, the newest first, in
 * both headers (Stripe's `t=…,v1=…,v1=…`; Standard Webhooks' space-separated list): verifiers of
 * either family accept a body any one of them signs.
 */
import { createHmac, randomBytes } from 'node:crypto';

export const SECRET_PREFIX = 'whsec_';

/** SQL: webhook row `w`'s rotated-out secret (sealed) while it is still honoured, else null. */
export const PREVIOUS_SECRET = (w: string) => `CASE WHEN ${w}.previous_secret_expires_at > now() THEN ${w}.previous_secret_sealed END`;
/** SQL: until when webhook row `w`'s rotated-out secret is honoured, null when it is not (any more). */
export const PREVIOUS_SECRET_EXPIRY = (w: string) => `CASE WHEN ${w}.previous_secret_expires_at > now() THEN ${w}.previous_secret_expires_at END`;

/** The associated data that binds a sealed secret to its webhook. */
export const secretAad = (tenantId: string, webhookId: string) => `webhook:${tenantId}:${webhookId}`;

export function generateSecret(): string {
  return SECRET_PREFIX + randomBytes(32).toString('base64');
}

/** Standard Webhooks: a symmetric key is "between 24 bytes (192 bits) and 64 bytes (512 bits)". */
const STANDARD_KEY_BYTES = { min: 24, max: 64 };

/**
 * Why a secret the caller chose cannot be the Standard Webhooks secret it looks like, or
 * undefined. Their libraries strip `whsec_` and decode the rest as base64, strictly:
 * `standardwebhooks` (JavaScript) throws on `-`, `_` or `.`, Python's and Go's on missing
 * padding, and some refuse a key outside 24-64 bytes. Such a secret would have been used here
 * as raw bytes, which a receiver told it is a `whsec_` value does not try. Only the canonical
 * form (padded, no stray bits) decodes to the same key everywhere.
 */
export function chosenSecretProblem(secret: string): string | undefined {
  if (!secret.startsWith(SECRET_PREFIX)) return undefined;
  const b64 = secret.slice(SECRET_PREFIX.length);
  const key = Buffer.from(b64, 'base64');
  if (key.toString('base64') === b64 && key.length >= STANDARD_KEY_BYTES.min && key.length <= STANDARD_KEY_BYTES.max) return undefined;
  return (
    `starts with ${SECRET_PREFIX}, so Standard Webhooks libraries decode the rest as base64: it must be ${STANDARD_KEY_BYTES.min}-${STANDARD_KEY_BYTES.max} random bytes ` +
    `in padded standard base64 (A-Z a-z 0-9 + /, = at the end), or leave the secret out to have one generated; a secret without that prefix is used as is`
  );
}

function standardKey(secret: string): Buffer {
  const b64 = secret.startsWith(SECRET_PREFIX) ? secret.slice(SECRET_PREFIX.length) : undefined;
  if (b64 !== undefined && /^[A-Za-z0-9+/]+={0,2}$/.test(b64)) return Buffer.from(b64, 'base64');
  return Buffer.from(secret, 'utf8');
}

export interface SignedHeaders {
  'X-Svc-Signature': string;
  'webhook-id': string;
  'webhook-timestamp': string;
  'webhook-signature': string;
}

/** Signs with each of `secrets` (the current one first). */
export function signDelivery(secrets: readonly string[], eventId: string, body: string | Buffer, unixSeconds: number): SignedHeaders {
  const t = String(unixSeconds);
  const svc = secrets.map((secret) => `v1=${createHmac('sha256', secret).update(`${t}.`).update(body).digest('hex')}`);
  const standard = secrets.map((secret) => `v1,${createHmac('sha256', standardKey(secret)).update(`${eventId}.${t}.`).update(body).digest('base64')}`);
  return {
    'X-Svc-Signature': `t=${t},${svc.join(',')}`,
    'webhook-id': eventId,
    'webhook-timestamp': t,
    'webhook-signature': standard.join(' '),
  };
}
