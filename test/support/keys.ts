/** Shared expectations about API key bodies (SPEC 2.7). */
export const KEY_FIELDS = [
  'id',
  'label',
  'role',
  'source',
  'default_tier',
  'type_permissions',
  'extension_permissions',
  'edge_permissions',
];

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;
const RFC3339 = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?Z$/;

/** Checks an API key body; `withPlaintext` says whether `key` must (true) or must not (false) be there. */
export function expectKeyBody(body: Record<string, any>, withPlaintext: boolean): void {
  for (const f of KEY_FIELDS) expect(body).toHaveProperty(f);
  expect(body.id).toMatch(UUID);
  expect(body.tenant_id).toMatch(UUID);
  expect(['admin', 'member']).toContain(body.role);
  expect(typeof body.source).toBe('string');
  expect(body.created_at).toMatch(RFC3339);
  // Beyond SPEC 2.7: when the key stops working by itself, and when it was last used (null: never).
  for (const f of ['expires_at', 'last_used_at']) {
    expect(body).toHaveProperty(f);
    if (body[f] !== null) expect(body[f]).toMatch(RFC3339);
  }
  if (withPlaintext) expect(body.key).toMatch(/^svc_k1_[A-Za-z0-9_-]{20,}$/);
  else {
    expect(body).not.toHaveProperty('key');
    expect(JSON.stringify(body)).not.toMatch(/svc_k1_[A-Za-z0-9_-]{20,}/);
  }
}
