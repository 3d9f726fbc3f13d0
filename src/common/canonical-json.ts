/** One JSON text per value, whatever the order its objects' keys came in. */

/**
 * JSON with object keys sorted at every level, so `{a,b}` and `{b,a}` are one text: an
 * idempotent request's body (idempotency-key.ts), a jsonb value read back in PostgreSQL's key
 * order (audit.service.ts `changedFields`). `undefined` is the empty text.
 */
export function canonicalJson(value: unknown): string {
  if (value === undefined) return '';
  return JSON.stringify(value, (_key, v: unknown) => {
    if (v === null || typeof v !== 'object' || Array.isArray(v)) return v;
    const sorted: Record<string, unknown> = {};
    for (const k of Object.keys(v as object).sort()) sorted[k] = (v as Record<string, unknown>)[k];
    return sorted;
  });
}
