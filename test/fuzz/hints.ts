/**
 * What the OpenAPI schemas cannot say: which values make a request succeed (an existing type
 * name, an item id of the caller's tenant, a fresh dotted name) and which aim at tenant B
 * (B's ids and names where a reference is expected). Keyed by component schema and field,
 * or by parameter name; everything not listed here is generated from its schema alone.
 *
 * B's values appear only where the request *refers* to something (ids, type names in filters
 * and references). They never appear where tenant A would legitimately *store* them (a new
 * type's name, tags, free text), so a B canary in a response can only be a real leak.
 */
import fc from 'fast-check';
import { Fixtures } from './fixtures';
import { benignString, dateTime, HintLookup } from './schema-arbitrary';
import { RFC3339_EDGE } from './hostile';

export interface Pools {
  itemIds: fc.Arbitrary<string>;
  typeRefs: fc.Arbitrary<string>;
  typePatterns: fc.Arbitrary<string>;
  edgeTypeRefs: fc.Arbitrary<string>;
  freshName: (kind: string) => fc.Arbitrary<string>;
  tags: fc.Arbitrary<string>;
  words: fc.Arbitrary<string>;
  sources: fc.Arbitrary<string>;
  cursors: fc.Arbitrary<string>;
}

const CORE_TYPES = ['core.note', 'core.bookmark', 'core.document', 'core.task', 'core.contact', 'core.event'];

/** Mostly A (things that work), sometimes B (isolation probes), sometimes neither. */
function mix(a: string[], b: string[], other: fc.Arbitrary<string>): fc.Arbitrary<string> {
  return fc.oneof({ weight: 6, arbitrary: fc.constantFrom(...a) }, { weight: 2, arbitrary: fc.constantFrom(...b) }, { weight: 1, arbitrary: other });
}

export function makePools(f: Fixtures): Pools {
  const cursor = (id: string) => Buffer.from(JSON.stringify(['2020-01-01T00:00:00.000Z', id])).toString('base64url');
  // A small name space on purpose: names collide (409s), and later requests refer to types and
  // edge types that earlier ones created, with whatever schema the fuzzer gave them.
  const freshName = (kind: string) => fc.tuple(fc.nat(40), fc.constantFrom('', '.sub', '.a.b')).map(([n, sfx]) => `fz${kind}${n}${sfx}`);
  return {
    itemIds: mix(f.a.itemIds, f.b.itemIds, fc.uuid()),
    typeRefs: mix([...CORE_TYPES, ...f.a.types], f.b.types, fc.oneof(freshName('t'), fc.constantFrom('nope.type', 'core', 'CORE.NOTE', 'core.note.sub'))),
    typePatterns: fc.constantFrom('*', 'core.*', 'core.note', 'fuzza.*', 'fzt1.*', ...f.a.types),
    edgeTypeRefs: mix(f.a.edgeTypes, f.b.edgeTypes, fc.oneof(freshName('e'), fc.constantFrom('nope.links', '*'))),
    freshName,
    tags: fc.oneof(fc.constantFrom(...f.a.tags, 'x', 'shared'), benignString(1, 20)),
    words: fc.constantFrom(...f.a.words, ...f.b.words, 'note', 'title', 'hel', '"fuzzcanarya title"', 'a or -b'),
    sources: mix(f.a.sources, f.b.sources, fc.constantFrom('nope', 'unknown-source')),
    cursors: mix(f.a.itemIds.map(cursor), f.b.itemIds.map(cursor), fc.constantFrom('abc', 'W10', 'bnVsbA', cursor('not-an-id'))),
  };
}

const patternMap = (p: Pools) => fc.dictionary(p.typePatterns, fc.constantFrom('read', 'write'), { maxKeys: 3 });

/** Item `properties` that match the seeded types, so creates and patches succeed. */
const itemProperties = fc.record(
  {
    title: benignString(1, 30),
    body: benignString(0, 60),
    count: fc.integer({ min: -5, max: 1000 }),
    nested: fc.dictionary(benignString(1, 8), fc.jsonValue({ maxDepth: 2 }), { maxKeys: 2 }),
    url: fc.constantFrom('https://example.com/a', 'http://localhost/x'),
    starts_at: dateTime,
    name: benignString(1, 20),
  },
  { requiredKeys: ['title'] },
);

/** Type schemas: ordinary ones (so creates succeed) and hostile ones. */
const typeSchemas = fc.constantFrom<Record<string, unknown>>(
  { type: 'object', properties: { title: { type: 'string' } } },
  { type: 'object', properties: { title: { type: 'string', maxLength: 5 }, n: { type: 'integer', minimum: 0 } }, required: ['title'] },
  { type: 'object', properties: { secret: { type: 'string', searchable: false } }, additionalProperties: false },
  { type: 'object', properties: { kind: { enum: ['a', 'b'] }, when: { type: 'string', format: 'date-time' } } },
  { type: 'object', properties: { self: { $ref: '#' } } },
  { type: 'string' },
  { type: 'object', properties: { x: { type: 'nonsense' } } },
  { $schema: 'http://json-schema.org/draft-04/schema#', type: 'object' },
  // What a tenant may write into a schema is input too: bad regexes, unknown formats,
  // unresolvable or circular references, absurd bounds, odd type unions.
  { type: 'object', properties: { title: { type: 'string', pattern: '(' } } },
  { type: 'object', properties: { title: { type: 'string', format: 'no-such-format' } } },
  { type: 'object', properties: { a: { $ref: '#/properties/a' } } },
  { type: 'object', properties: { a: { $ref: '#/$defs/missing' } } },
  { type: 'object', $defs: { n: { type: 'object', properties: { next: { $ref: '#/$defs/n' } } } }, properties: { list: { $ref: '#/$defs/n' } } },
  { type: 'object', properties: { title: { type: ['string', 'null'], maxLength: 1e308 } } },
  { type: 'object', properties: { title: { type: 'integer' } }, required: 'title' },
  { type: 'object', properties: { title: { enum: [] } } },
  { type: 'object', properties: { title: { type: 'string' } }, additionalProperties: { $ref: '#' } },
  { type: 'object', properties: { title: { type: 'string', searchable: 'sometimes' } } },
  JSON.parse('{"type":"object","properties":{"":{"type":"string"},"a.b":{"type":"string"},"__proto__":{"type":"string"}}}'),
  { $id: 'http://evil.example/s', type: 'object' },
  { type: 'object', properties: { title: { type: 'string' } }, allOf: [{ required: ['title'] }, { not: {} }] },
);

/** `property` filter clauses: paths the fixtures' items have or lack, every operator, JSON scalars and plain text. */
const propertyClause = fc
  .tuple(
    fc.constantFrom('title', 'status', 'n', 'x.y', 'lines.0', 'missing'),
    fc.constantFrom('=', '!=', '<', '<=', '>', '>='),
    fc.oneof(fc.constantFrom('open', '"open"', '1', '-2.5', '1e400', 'true', 'null', '', '"é"'), benignString(0, 12)),
  )
  .map(([path, op, value]) => `${path}${op}${value}`);

export function makeHints(p: Pools): HintLookup {
  const table: Record<string, fc.Arbitrary<unknown>> = {
    // Items
    'CreateItemDto.type': p.typeRefs,
    'CreateItemDto.properties': itemProperties,
    'PatchItemDto.properties': itemProperties,
    'CreateItemDto.tags': fc.array(p.tags, { maxLength: 4 }),
    'PatchItemDto.tags': fc.array(p.tags, { maxLength: 4 }),
    'CreateItemDto.timestamp': fc.oneof({ weight: 2, arbitrary: dateTime }, { weight: 1, arbitrary: fc.constantFrom(...RFC3339_EDGE) }),
    'PatchItemDto.timestamp': fc.oneof({ weight: 2, arbitrary: dateTime }, { weight: 1, arbitrary: fc.constantFrom(...RFC3339_EDGE) }),
    'CreateItemDto.source_id': fc.constantFrom('nk-1', 'nk-2', 'nk-3', 'natural/key', 'nk-é'),
    'CreateItemDto.edges': fc.dictionary(p.edgeTypeRefs, fc.array(p.itemIds, { maxLength: 2 }), { maxKeys: 1 }),
    'CreateItemDto.extensions': fc.dictionary(fc.constantFrom('fuzza.ext', 'acme', 'fz.ns'), fc.dictionary(benignString(1, 8), fc.jsonValue({ maxDepth: 2 }), { maxKeys: 2 }), { maxKeys: 2 }),
    'PatchItemDto.version': fc.integer({ min: 1, max: 4 }),
    'MetadataPatchDto.tags': fc.array(p.tags, { maxLength: 4 }),
    'MetadataPatchDto.add_tags': fc.array(p.tags, { maxLength: 4 }),
    'MetadataPatchDto.remove_tags': fc.array(p.tags, { maxLength: 4 }),
    // Bulk elements are POST /items bodies; the schema only says "object".
    'BulkItemsDto.items': fc.array(
      fc.record({ type: p.typeRefs, properties: itemProperties, tags: fc.array(p.tags, { maxLength: 2 }), source_id: fc.constantFrom('nk-1', 'bulk-1', 'bulk-2') }, { requiredKeys: ['type'] }),
      { maxLength: 4 },
    ),
    // Types and edge types: fresh names, references to existing ones.
    'CreateTypeDto.name': p.freshName('t'),
    'CreateTypeDto.parent': p.typeRefs,
    'CreateTypeDto.schema': typeSchemas,
    'UpdateTypeDto.schema': typeSchemas,
    'CreateTypeDto.merge_policy': fc.dictionary(fc.constantFrom('title', 'n', 'x'), fc.constantFrom('manual', 'client_wins', 'server_wins', 'union'), { maxKeys: 2 }),
    'CreateEdgeTypeDto.name': p.freshName('e'),
    'CreateEdgeTypeDto.source_types': fc.array(p.typePatterns, { minLength: 1, maxLength: 3 }),
    'CreateEdgeTypeDto.target_types': fc.array(p.typePatterns, { minLength: 1, maxLength: 3 }),
    // Edges: references, to A's and B's items.
    'CreateEdgeDto.type': p.edgeTypeRefs,
    'CreateEdgeDto.source_id': p.itemIds,
    'CreateEdgeDto.target_id': p.itemIds,
    // Keys: narrow maps, fresh sources.
    'CreateKeyDto.type_permissions': patternMap(p),
    'CreateKeyDto.extension_permissions': patternMap(p),
    'CreateKeyDto.edge_permissions': patternMap(p),
    'CreateKeyDto.source': p.freshName('src'),
    'UpdateKeyDto.type_permissions': patternMap(p),
    'UpdateKeyDto.extension_permissions': patternMap(p),
    'UpdateKeyDto.edge_permissions': patternMap(p),
    // Query parameters (owner "query").
    'query.type': p.typeRefs,
    'query.tags': fc.array(p.tags, { minLength: 1, maxLength: 3 }).map((t) => t.join(',')),
    'query.source': p.sources,
    'query.edge': fc.tuple(p.edgeTypeRefs, p.itemIds).map(([t, id]) => `${t}:${id}`),
    'query.backref': fc.tuple(p.edgeTypeRefs, p.itemIds).map(([t, id]) => `${t}:${id}`),
    'query.property': propertyClause,
    'BulkFilterDto.property': fc.array(propertyClause, { minLength: 1, maxLength: 3 }),
    'query.cursor': p.cursors,
    'query.q': p.words,
    'query.before': fc.integer({ min: 1, max: 5 }),
    'query.since': fc.oneof({ weight: 4, arbitrary: dateTime }, { weight: 1, arbitrary: fc.constantFrom(...RFC3339_EDGE) }),
    'query.until': fc.oneof({ weight: 4, arbitrary: dateTime }, { weight: 1, arbitrary: fc.constantFrom(...RFC3339_EDGE) }),
  };
  return (owner, field) => (owner && field ? table[`${owner}.${field}`] : undefined);
}
