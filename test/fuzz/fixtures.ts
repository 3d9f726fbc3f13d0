/**
 * The world the fuzzer runs in: tenant A (the root tenant: its admin key, a narrow member key
 * and two sacrificial keys the fuzzer may change or revoke) and tenant B (the victim), each
 * seeded with items, a type, an edge type, an edge, tags and a blob. Every value of tenant B
 * carries its own distinctive canary, and every id of B is remembered, so that any response to
 * tenant A or to an anonymous caller that contains one of them is a cross-tenant leak.
 */
import { createHash, randomBytes } from 'node:crypto';
import { bearer, bootstrapAdmin, createKey, createTenant, TestApp } from '../support/app';

export interface Secret {
  kind: string;
  value: string;
  /**
   * Operations (ids such as "GET /tenants") whose answers to tenant A's admin may show it: tenant
   * A is the root tenant, whose admins list the tenants and read their creation in the audit log.
   */
  rootAdminReads?: RegExp;
}

/** Where the root tenant's admins see other tenants' ids and names. */
const ROOT_ADMIN_READS_TENANTS = /^(GET|HEAD) \/(tenants|tenants\/\{id\}|audit)$/;

/** One tenant's seeded objects, by kind. */
interface TenantObjects {
  keyIds: string[];
  itemIds: string[];
  edgeIds: string[];
  hashes: string[];
  types: string[];
  edgeTypes: string[];
  tags: string[];
  sources: string[];
  words: string[];
}

export interface Fixtures {
  base: string;
  keys: { adminA: string; memberA: string; adminB: string };
  /** Ids of keys the fuzzer authenticates with: never revoked or changed by it. */
  ownKeyIds: string[];
  /** Tenant A's objects (targets for ordinary, successful requests). */
  a: TenantObjects & { sacrificialKeyIds: string[] };
  /** Tenant B's objects, by kind: the fuzzer aims at them as tenant A. */
  b: TenantObjects & { tenantId: string };
  /** Everything of B that must never appear in a response to A or to nobody. */
  secrets: Secret[];
  /** Snapshot of B's items (as B sees them) to prove after the run that A changed nothing. */
  bItemsBefore: Record<string, unknown>;
}

const letters = (n: number) => Array.from(randomBytes(n), (b) => String.fromCharCode(97 + (b % 26))).join('');

async function ok<T = any>(res: { status: number; body: any }, expected: number[], what: string): Promise<T> {
  if (!expected.includes(res.status)) throw new Error(`fixture ${what}: ${res.status} ${JSON.stringify(res.body)}`);
  return res.body as T;
}

async function seedTenant(t: TestApp, key: string, prefix: string, canary: (what: string) => string) {
  const as = (path: string, body: object) => t.http.post(path).set(bearer(key)).send(body);
  const type = `${prefix}.thing`;
  const edgeType = `${prefix}.links`;
  await ok(await as('/types', {
    name: type,
    schema: {
      type: 'object',
      properties: { title: { type: 'string' }, count: { type: 'integer' }, nested: { type: 'object' }, secret: { type: 'string', searchable: false } },
      required: ['title'],
    },
    merge_policy: { title: 'client_wins' },
  }), [201], `${prefix} type`);
  await ok(await as('/edge-types', { name: edgeType, source_types: ['*'], target_types: ['*'] }), [201], `${prefix} edge type`);
  const tag = canary('tag').toLowerCase();
  const items = [
    await ok(await as('/items', { type: 'core.note', properties: { title: canary('title'), body: canary('body') }, tags: [tag, 'shared'] }), [201], 'note'),
    await ok(await as('/items', { type, properties: { title: canary('thing'), count: 3, nested: { deep: canary('nested') }, secret: canary('hidden') } }), [201], 'thing'),
    await ok(await as('/items', { type: 'core.task', properties: { title: canary('task'), status: 'open' }, source_id: canary('natural-key'), extensions: { [`${prefix}.ext`]: { note: canary('ext') } } }), [201], 'task'),
  ];
  const edge = await ok(await as('/edges', { type: edgeType, source_id: items[0].id, target_id: items[1].id }), [201], 'edge');
  const blob = await ok(await t.http.post('/blobs').set(bearer(key)).set('Content-Type', 'text/plain').send(canary('blob bytes')), [201], 'blob');
  await ok(await t.http.patch(`/items/${items[1].id}/metadata`).set(bearer(key)).send({ add_tags: [tag] }), [200], 'tags');
  return { type, edgeType, tag, items, edge, blob };
}

export async function seedFixtures(t: TestApp): Promise<Fixtures> {
  const root = await bootstrapAdmin(t);
  const run = letters(6);
  const canaryA = (what: string) => `fuzzcanarya ${what} ${run}`;
  // One canary per value of B, so that a request naming one of them (a path like
  // /types/<B's type>) only exempts that one from the leak check, not all of B.
  const canaryB = (what: string) => `zqcanaryb-${what.replace(/\W/g, '')}-${run}`;

  const memberA = await createKey(t, root.key, {
    label: 'fuzz member A',
    role: 'member',
    type_permissions: { 'core.note': 'write', 'fuzza.*': 'read' },
    edge_permissions: { 'fuzza.links': 'read' },
  });
  const spareAdmin = await createKey(t, root.key, { label: 'sacrificial admin', role: 'admin' });
  const spareMember = await createKey(t, root.key, { label: 'sacrificial member', type_permissions: { '*': 'read' } });
  const seededA = await seedTenant(t, root.key, 'fuzza', canaryA);

  const tenantB = await createTenant(t, root.key, canaryB('tenant name'));
  const bAdminId = (await ok(await t.http.get('/keys').set(bearer(tenantB.key)), [200], 'B keys')).keys[0].id as string;
  const bMember = await createKey(t, tenantB.key, {
    label: canaryB('key label'),
    source: canaryB('source'),
    type_permissions: { '*': 'write' },
  });
  const bPrefix = `zqcanaryb${run}`;
  const seededB = await seedTenant(t, tenantB.key, bPrefix, canaryB);

  const bItemsBefore: Record<string, unknown> = {};
  for (const item of seededB.items) bItemsBefore[item.id] = (await t.http.get(`/items/${item.id}`).set(bearer(tenantB.key))).body;

  const secrets: Secret[] = [
    { kind: 'tenant id', value: tenantB.tenantId, rootAdminReads: ROOT_ADMIN_READS_TENANTS },
    { kind: 'tenant name', value: canaryB('tenant name'), rootAdminReads: ROOT_ADMIN_READS_TENANTS },
    { kind: 'key id', value: bAdminId },
    { kind: 'key id', value: bMember.id },
    { kind: 'plaintext key', value: tenantB.key },
    { kind: 'plaintext key', value: bMember.key },
    { kind: 'key label', value: canaryB('key label') },
    { kind: 'key source', value: canaryB('source') },
    { kind: 'type name', value: seededB.type },
    { kind: 'edge type name', value: seededB.edgeType },
    { kind: 'extension namespace', value: `${bPrefix}.ext` },
    { kind: 'edge id', value: seededB.edge.id },
    { kind: 'blob hash', value: seededB.blob.hash },
    { kind: 'blob content', value: canaryB('blob bytes') },
    { kind: 'tag', value: seededB.tag },
    ...seededB.items.map((i: any) => ({ kind: 'item id', value: i.id as string })),
    ...['title', 'body', 'thing', 'nested', 'hidden', 'task', 'natural-key', 'ext'].map((w) => ({ kind: 'item text', value: canaryB(w) })),
  ];
  // The blob's hash is also a content fingerprint: prove the helper and the service agree.
  if (createHash('sha256').update(canaryB('blob bytes')).digest('hex') !== seededB.blob.hash) throw new Error('fixture: unexpected blob hash');

  return {
    base: t.url,
    keys: { adminA: root.key, memberA: memberA.key, adminB: tenantB.key },
    ownKeyIds: [root.id, memberA.id],
    a: {
      keyIds: [root.id, memberA.id, spareAdmin.id, spareMember.id],
      sacrificialKeyIds: [spareAdmin.id, spareMember.id],
      itemIds: seededA.items.map((i: any) => i.id),
      edgeIds: [seededA.edge.id],
      hashes: [seededA.blob.hash],
      types: [seededA.type],
      edgeTypes: [seededA.edgeType],
      tags: [seededA.tag, 'shared'],
      sources: [memberA.source, spareMember.source],
      words: ['fuzzcanarya', run, 'title', 'thing'],
    },
    b: {
      tenantId: tenantB.tenantId,
      keyIds: [bAdminId, bMember.id],
      itemIds: seededB.items.map((i: any) => i.id),
      edgeIds: [seededB.edge.id],
      hashes: [seededB.blob.hash],
      types: [seededB.type],
      edgeTypes: [seededB.edgeType],
      tags: [seededB.tag],
      sources: [canaryB('source')],
      words: [canaryB('title'), 'zqcanaryb'],
    },
    secrets,
    bItemsBefore,
  };
}
