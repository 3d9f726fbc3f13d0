/**
 * Operation → arbitrary of complete HTTP requests. For each operation of the OpenAPI document
 * it combines a persona (tenant A's admin or member, nobody, a garbage credential), path
 * parameters (A's and B's ids, hostile segments), query parameters (valid, leniently spelt,
 * hostile, raw percent tokens, unknown and prototype names), headers and a body mode: a
 * schema-valid-ish JSON body with hostile mutations, or malformed JSON, a wrong Content-Type,
 * a Content-Encoding the bytes do not match, invalid UTF-8, an oversized body or none at all.
 *
 * A request is plain data (the wire form: method, encoded path and query, header list, body
 * bytes), so that what is sent, checked and printed as a replay is byte for byte the same.
 */
import fc from 'fast-check';
import { gzipSync, deflateSync } from 'node:zlib';
import { deepJson, pct, RawJson, toJsonText, wtf8 } from './encoding';
import { Fixtures } from './fixtures';
import { makeHints, makePools, Pools } from './hints';
import {
  deepNesting, enumVariants, HOSTILE_KEYS, hostileSegment, hostileString, LENIENT_INTEGERS, NOT_RFC3339, RAW_URL_TOKENS, wrongTypedValue,
} from './hostile';
import { OpenApiDoc, Operation, Param, Schema } from './openapi';
import { protocolArb } from './protocol';
import { schemaArbitrary, SchemaArbOptions } from './schema-arbitrary';

export type Persona = 'admin' | 'member' | 'none' | 'garbage';

export interface FuzzRequest {
  persona: Persona;
  /** The Authorization header sent by the garbage persona (admin/member use fixture keys). */
  garbageAuth?: string;
  method: string;
  /** Operation id ("PATCH /items/{id}"), for grouping; variants keep their operation's id. */
  route: string;
  /** How the request deviates from a plain call of the operation (for reports). */
  labels: string[];
  /** Path and query exactly as sent on the request line (already percent-encoded). */
  path: string;
  query: string;
  headers: Array<[string, string]>;
  body?: Buffer;
  /** Protocol-level cases (protocol.ts): the complete request bytes, sent as they are. */
  raw?: Buffer;
}

/** fast-check prints this instead of a megabyte of body. */
export function describeRequest(r: FuzzRequest): string {
  if (r.raw) return `raw ${r.labels.join(',')}: ${JSON.stringify(r.raw.subarray(0, 300).toString('latin1'))}${r.raw.length > 300 ? `…(${r.raw.length} bytes)` : ''}`;
  const target = r.path + (r.query ? `?${r.query}` : '');
  const shown = target.length > 300 ? `${target.slice(0, 300)}…(${target.length} chars)` : target;
  const body = r.body ? ` body=${r.body.length}B ${JSON.stringify(r.body.subarray(0, 120).toString('latin1'))}${r.body.length > 120 ? '…' : ''}` : '';
  return `${r.persona} ${r.method} ${shown} [${r.labels.join(',')}] headers=${JSON.stringify(r.headers.map(([k, v]) => `${k}: ${v.length > 80 ? v.slice(0, 80) + '…' : v}`))}${body}`;
}

function withToString(r: FuzzRequest): FuzzRequest {
  Object.defineProperty(r, fc.toStringMethod, { value: () => describeRequest(r), enumerable: false });
  return r;
}

/* ------------------------------------------------------------------------------------------ */
/* Personas                                                                                     */

const GARBAGE_AUTH = [
  'Bearer', 'Bearer ', 'Bearer  ', 'bearer x', 'Basic dXNlcjpwYXNz', 'Token abc', 'Bearer svc_k1_', 'Bearer svc_at_abc',
  'Bearer svc_k1_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA', "Bearer ' OR 1=1 --", 'Bearer %00', 'Bearer \u00ff\u00fe',
  'Bearer svc_k1_' + 'a'.repeat(5000), 'Bearer a, Bearer b', 'Bearer svc_k1_../../x',
];

const persona: fc.Arbitrary<{ persona: Persona; garbageAuth?: string }> = fc.oneof(
  { weight: 5, arbitrary: fc.constant({ persona: 'admin' as Persona }) },
  { weight: 3, arbitrary: fc.constant({ persona: 'member' as Persona }) },
  { weight: 1, arbitrary: fc.constant({ persona: 'none' as Persona }) },
  { weight: 1, arbitrary: fc.constantFrom(...GARBAGE_AUTH).map((garbageAuth) => ({ persona: 'garbage' as Persona, garbageAuth })) },
);

/* ------------------------------------------------------------------------------------------ */
/* Path parameters                                                                              */

function pathPool(op: Operation, f: Fixtures): string[] {
  const mutating = op.method !== 'GET' && op.method !== 'HEAD';
  const hashes = (hs: string[]) => hs.flatMap((h) => [h, `sha256:${h}`, h.toUpperCase()]);
  const prefix = op.path.split('/')[1];
  switch (prefix) {
    // The fuzzer must not revoke or demote the keys it authenticates with.
    case 'keys': return mutating ? [...f.a.sacrificialKeyIds, ...f.b.keyIds] : [...f.a.keyIds, ...f.b.keyIds];
    case 'types': return ['core.note', 'core.task', ...f.a.types, ...f.b.types];
    case 'items': return [...f.a.itemIds, ...f.b.itemIds];
    case 'edges': return [...f.a.edgeIds, ...f.b.edgeIds];
    case 'edge-types': return [...f.a.edgeTypes, ...f.b.edgeTypes];
    case 'blobs': return [...hashes(f.a.hashes), ...hashes(f.b.hashes)];
    default: return [...f.a.itemIds];
  }
}

interface PathValue { value: string; hostile: boolean }

/** Ids that exist (A's, B's) or are well-formed but unknown. */
function safePathParam(op: Operation, f: Fixtures): fc.Arbitrary<PathValue> {
  return fc
    .oneof(
      { weight: 6, arbitrary: fc.constantFrom(...pathPool(op, f).map((v) => pct(v))) },
      { weight: 1, arbitrary: fc.constantFrom('00000000-0000-0000-0000-000000000000', '123e4567-e89b-12d3-a456-42661417400Z', 'FFFFFFFF-FFFF-4FFF-BFFF-FFFFFFFFFFFF') },
      { weight: 1, arbitrary: fc.uuid() },
    )
    .map((value) => ({ value, hostile: false }));
}

const hostilePathParam: fc.Arbitrary<PathValue> = hostileSegment.map((value) => ({ value, hostile: true }));

/* ------------------------------------------------------------------------------------------ */
/* Query parameters                                                                             */

interface QueryPart { name: string; value?: string; label?: string }

function lenientValues(schema: Schema): string[] {
  if (Array.isArray(schema.enum)) return schema.enum.flatMap((v: unknown) => enumVariants(String(v)));
  if (schema.type === 'number' || schema.type === 'integer') {
    const out = [...LENIENT_INTEGERS, '1.5', '-1', '0', '1e2', '1e999', '99999999999999999999'];
    if (schema.minimum !== undefined) out.push(String(schema.minimum - 1));
    if (schema.maximum !== undefined) out.push(String(schema.maximum + 1));
    return out;
  }
  if (schema.format === 'date-time') return NOT_RFC3339;
  if (schema.type === 'string') return ['', ' ', 'a'.repeat((schema.maxLength ?? 1000) + 1)];
  return [''];
}

/** A present, schema-valid value (or values, for an array parameter). */
function validParam(p: Param, opts: SchemaArbOptions): fc.Arbitrary<QueryPart[]> {
  const value = schemaArbitrary(p.schema.type === 'array' ? p.schema.items : p.schema, opts, 'query', p.name).map((v) => pct(String(v)));
  return p.schema.type === 'array'
    ? fc.array(value, { minLength: 1, maxLength: 3 }).map((vs) => vs.map((v) => ({ name: pct(p.name), value: v })))
    : value.map((v) => [{ name: pct(p.name), value: v }]);
}

/** A value that is not what the schema asks for, spelt in one of the ways parsers disagree on. */
function oddParam(p: Param, opts: SchemaArbOptions): fc.Arbitrary<QueryPart[]> {
  const one = (value: string, label: string): QueryPart[] => [{ name: pct(p.name), value, label }];
  const valid = validParam(p, opts);
  return fc.oneof(
    { weight: 5, arbitrary: fc.constantFrom(...lenientValues(p.schema)).map((v) => one(pct(v), 'lenient')) },
    { weight: 3, arbitrary: hostileString.map((s) => one(pct(s.slice(0, 5000)), 'hostile')) },
    { weight: 1, arbitrary: fc.constantFrom(...RAW_URL_TOKENS).map((t) => one(t, 'raw-token')) },
    // The same parameter twice, which frameworks turn into an array.
    { weight: 1, arbitrary: fc.tuple(valid, valid).map(([a, b]) => [...a, ...b.map((q) => ({ ...q, label: 'repeated' }))]) },
    { weight: 1, arbitrary: fc.constant<QueryPart[]>([{ name: pct(p.name), label: 'no-equals' }]) },
  );
}

const EXTRA_NAMES = [
  '__proto__', 'constructor', 'prototype', '__proto__[polluted]', 'constructor[prototype][polluted]', 'a[b]', 'a[]', 'limit[]',
  'colour', '', '$where', 'q[$ne]', 'filter[type]', 'a' + '[a]'.repeat(1000), 'x'.repeat(2000),
];

const extraParam: fc.Arbitrary<QueryPart> = fc.oneof(
  fc.record({ name: fc.constantFrom(...EXTRA_NAMES).map(pct), value: fc.constantFrom('1', 'x', '', pct('{"$gt":""}')) }).map((q) => ({ ...q, label: 'unknown-param' })),
  fc.record({ name: hostileString.map((s) => pct(s.slice(0, 200))), value: fc.constant('1') }).map((q) => ({ ...q, label: 'unknown-param' })),
  fc.constantFrom(...RAW_URL_TOKENS).map((t) => ({ name: t, value: t, label: 'raw-token' })),
  fc.constantFrom('&', '&&', '=', '==', '=&=').map((raw) => ({ name: raw, label: 'raw-query' })),
);

/** Optional parameters absent by default (shrinking removes them); required ones present. */
function validQuery(op: Operation, opts: SchemaArbOptions): fc.Arbitrary<QueryPart[]> {
  const parts = op.params
    .filter((p) => p.in === 'query')
    .map((p) => (p.required ? validParam(p, opts) : fc.oneof({ withCrossShrink: true }, { weight: 3, arbitrary: fc.constant<QueryPart[]>([]) }, { weight: 2, arbitrary: validParam(p, opts) })));
  return fc.tuple(...parts).map((ds) => ds.flat());
}

/**
 * A valid query with exactly one thing wrong: one parameter odd, or one or two unknown ones.
 * One fault at a time gets past the other checks, so a parser that accepts the odd value shows.
 */
function focusedQuery(op: Operation, opts: SchemaArbOptions): fc.Arbitrary<QueryPart[]> {
  const declared = op.params.filter((p) => p.in === 'query');
  const odd = declared.length
    ? fc.tuple(validQuery(op, opts), fc.oneof(...declared.map((p) => oddParam(p, opts).map((parts) => ({ name: pct(p.name), parts })))))
        .map(([valid, { name, parts }]) => [...valid.filter((q) => q.name !== name), ...parts])
    : undefined;
  const extras = fc.tuple(validQuery(op, opts), fc.array(extraParam, { minLength: 1, maxLength: 2 })).map(([v, e]) => [...v, ...e]);
  return odd ? fc.oneof({ weight: 3, arbitrary: odd }, { weight: 1, arbitrary: extras }) : extras;
}

/** Everything at once, for the interactions. */
function chaoticQuery(op: Operation, opts: SchemaArbOptions): fc.Arbitrary<QueryPart[]> {
  const parts = op.params
    .filter((p) => p.in === 'query')
    .map((p) => fc.oneof({ withCrossShrink: true }, { weight: p.required ? 1 : 3, arbitrary: fc.constant<QueryPart[]>([]) }, { weight: 2, arbitrary: validParam(p, opts) }, { weight: 2, arbitrary: oddParam(p, opts) }));
  const extra = fc.oneof({ withCrossShrink: true }, { weight: 3, arbitrary: fc.constant<QueryPart[]>([]) }, { weight: 1, arbitrary: fc.array(extraParam, { minLength: 1, maxLength: 2 }) });
  return fc.tuple(fc.tuple(...parts), extra).map(([ds, e]) => [...ds.flat(), ...e]);
}

const renderQuery = (parts: QueryPart[]) => parts.map((q) => (q.value === undefined ? q.name : `${q.name}=${q.value}`)).join('&');

/* ------------------------------------------------------------------------------------------ */
/* Headers                                                                                      */

const HEADER_HOSTILE = ['', ' ', 'a b', 'x'.repeat(300), 'caf\u00e9', '\u00ff', '../../etc', "' OR 1=1 --", '%00', '{"$gt":""}', '*', '"', 'W/"x"', '\t'];

function headerArb(op: Operation, f: Fixtures, hostile: boolean): fc.Arbitrary<Array<[string, string]>> {
  const hash = f.a.hashes[0];
  const parts = op.params.filter((p) => p.in === 'header').map((p) => {
    const etag = p.name.toLowerCase() === 'if-none-match';
    const good = etag ? fc.constantFrom(`"${hash}"`, '*', `W/"${hash}"`, `"a", "${hash}"`, '"other"') : fc.oneof(fc.uuid(), fc.constantFrom('fz-idem-1', 'fz-idem-2'));
    const bad = etag ? fc.constantFrom(`"${f.b.hashes[0]}"`, hash, ...HEADER_HOSTILE) : fc.constantFrom(...HEADER_HOSTILE);
    const value = hostile ? fc.oneof(good, bad) : good;
    return fc.oneof({ withCrossShrink: true }, { weight: 3, arbitrary: fc.constant(undefined) }, { weight: 2, arbitrary: value.map((v) => [p.name, v] as [string, string]) });
  });
  const extra = hostile
    ? fc.oneof(
        { withCrossShrink: true },
        { weight: 2, arbitrary: fc.constant(undefined) },
        { weight: 1, arbitrary: fc.constantFrom(...HEADER_HOSTILE, 'ok-id.1_2').map((v) => ['X-Request-Id', v] as [string, string]) },
        { weight: 1, arbitrary: fc.constantFrom('application/xml', 'text/html;q=0', '*/*;q=x', '\u00ff/\u00ff').map((v) => ['Accept', v] as [string, string]) },
        { weight: 1, arbitrary: fc.constantFrom('1.2.3.4', 'x, y', "'; DROP TABLE x", '::1').map((v) => ['X-Forwarded-For', v] as [string, string]) },
      )
    : fc.constant(undefined);
  return fc.tuple(fc.tuple(...parts), extra).map(([ds, e]) => [...ds, e].filter((h): h is [string, string] => h !== undefined));
}

/* ------------------------------------------------------------------------------------------ */
/* Bodies                                                                                       */

interface BodySpec { bytes?: Buffer; contentType?: string; headers?: Array<[string, string]>; label: string }

type Mutation =
  | { kind: 'replace'; where: number; value: unknown; label: string }
  | { kind: 'key'; where: number; key: string; value: unknown }
  | { kind: 'drop'; where: number };

const mutation: fc.Arbitrary<Mutation> = fc.oneof(
  { weight: 4, arbitrary: fc.record({ where: fc.nat(), value: hostileString }).map((m) => ({ kind: 'replace' as const, ...m, label: 'hostile-string' })) },
  { weight: 2, arbitrary: fc.record({ where: fc.nat(), value: wrongTypedValue }).map((m) => ({ kind: 'replace' as const, ...m, label: 'wrong-type' })) },
  { weight: 1, arbitrary: fc.record({ where: fc.nat(), value: deepNesting }).map((m) => ({ kind: 'replace' as const, ...m, label: 'deep' })) },
  { weight: 2, arbitrary: fc.record({ where: fc.nat(), key: fc.constantFrom(...HOSTILE_KEYS), value: fc.oneof(hostileString, wrongTypedValue) }).map((m) => ({ kind: 'key' as const, ...m })) },
  { weight: 1, arbitrary: fc.record({ where: fc.nat() }).map((m) => ({ kind: 'drop' as const, ...m })) },
);

interface Slot { get(): unknown; set(v: unknown): void; remove?(): void }

/** Every node of a JSON value, root first, as a slot that can be replaced in place. */
function slots(root: { v: unknown }): Slot[] {
  const out: Slot[] = [{ get: () => root.v, set: (v) => (root.v = v) }];
  const walk = (node: unknown) => {
    if (node instanceof RawJson || node === null || typeof node !== 'object') return;
    if (Array.isArray(node)) {
      node.forEach((child, i) => {
        out.push({ get: () => node[i], set: (v) => (node[i] = v), remove: () => node.splice(i, 1) });
        walk(child);
      });
    } else {
      for (const key of Object.keys(node)) {
        const obj = node as Record<string, unknown>;
        out.push({ get: () => obj[key], set: (v) => define(obj, key, v), remove: () => delete obj[key] });
        walk(obj[key]);
      }
    }
  };
  walk(root.v);
  return out;
}

/** Assignment would treat "__proto__" as the prototype; JSON.parse makes it an own key, so do we. */
function define(obj: Record<string, unknown>, key: string, value: unknown): void {
  Object.defineProperty(obj, key, { value, enumerable: true, writable: true, configurable: true });
}

function clone(v: unknown): unknown {
  if (v instanceof RawJson || v === null || typeof v !== 'object') return v;
  if (Array.isArray(v)) return v.map(clone);
  const out: Record<string, unknown> = {};
  for (const k of Object.keys(v)) define(out, k, clone((v as Record<string, unknown>)[k]));
  return out;
}

export function applyMutations(value: unknown, mutations: Mutation[]): { value: unknown; labels: string[] } {
  const root = { v: clone(value) };
  const labels: string[] = [];
  for (const m of mutations) {
    const all = slots(root);
    if (m.kind === 'replace') {
      all[m.where % all.length].set(clone(m.value));
      labels.push(m.label);
    } else if (m.kind === 'key') {
      const objects = all.map((s) => s.get()).filter((v): v is Record<string, unknown> => !!v && typeof v === 'object' && !Array.isArray(v) && !(v instanceof RawJson));
      if (objects.length) {
        define(objects[m.where % objects.length], m.key, clone(m.value));
        labels.push('hostile-key');
      }
    } else {
      const removable = all.filter((s) => s.remove);
      if (removable.length) {
        removable[m.where % removable.length].remove!();
        labels.push('dropped-field');
      }
    }
  }
  return { value: root.v, labels };
}

const JSON_TYPES = ['application/json', 'application/json; charset=utf-8', 'application/json;charset=UTF-8', 'Application/JSON', 'application/merge-patch+json', 'application/json; foo=bar'];

const MALFORMED_JSON = [
  '{', '{"type":', '{"type":"core.note",}', "{'type':'core.note'}", '{"type":"core.note"} trailing', '{"type":"core.note"}{"x":1}', 'NaN',
  '[1,]', '{"a":01}', '"unterminated', '{"a":"\\x41"}', '{"a":"\\u12"}', '{"a":"\\uD800"}', '{"a" "b"}', '{"a":tru}', '\u0000', '}',
  '', ' ', 'null', '[]', '"string"', '123', 'true', '{"a":1,"a":2}', '{"__proto__":{"isAdmin":true},"constructor":{"prototype":{"x":1}}}',
  '[' + '{},'.repeat(2000) + '{}]', '{"type":"core.note","properties":{"title":"\u0007"}}',
];

/** Bytes that are not valid UTF-8, spliced into an otherwise ordinary JSON body. */
const BAD_UTF8 = [[0xff], [0xfe, 0xff], [0xed, 0xa0, 0x80], [0xc0, 0xaf], [0x80], [0xf4, 0x90, 0x80, 0x80], [0xe0, 0x80], [0x00]];

const ENCODINGS = ['gzip', 'deflate', 'br', 'x-gzip', 'GZIP', 'gzip, gzip', 'identity', 'compress', 'xz', 'zstd', '*', 'gzip;q=1', ''];

let bomb: Buffer | undefined;
/** 8 MB of JSON in a few kB of gzip: decompressed, it is far past any body limit. */
const gzipBomb = () => (bomb ??= gzipSync(Buffer.from(`{"type":"core.note","properties":{"title":"${' '.repeat(8 * 1024 * 1024)}"}}`)));

function jsonBodyArb(op: Operation, opts: SchemaArbOptions, mutate: 'never' | 'sometimes' | 'always'): fc.Arbitrary<BodySpec> {
  const base = op.body?.schema ? schemaArbitrary(op.body.schema, opts, op.body.schemaName) : fc.jsonValue({ maxDepth: 2 });
  const some = fc.array(mutation, { minLength: 1, maxLength: 3 });
  const mutations =
    mutate === 'never' ? fc.constant<Mutation[]>([])
    : mutate === 'always' ? some
    : fc.oneof({ withCrossShrink: true }, { weight: 3, arbitrary: fc.constant<Mutation[]>([]) }, { weight: 4, arbitrary: some });
  const contentType = mutate === 'never' ? fc.constant('application/json') : fc.oneof({ weight: 8, arbitrary: fc.constant('application/json') }, { weight: 1, arbitrary: fc.constantFrom(...JSON_TYPES) });
  return fc.record({ value: base, mutations, contentType }).map(({ value, mutations: ms, contentType: ct }) => {
    const mutated = applyMutations(value, ms);
    return { bytes: Buffer.from(toJsonText(mutated.value), 'utf8'), contentType: ct, label: ['json', ...mutated.labels].join('+') };
  });
}

interface HostileBodies {
  malformed: fc.Arbitrary<BodySpec>;
  contentType: fc.Arbitrary<BodySpec>;
  encoding: fc.Arbitrary<BodySpec>;
  badUtf8: fc.Arbitrary<BodySpec>;
  size: fc.Arbitrary<BodySpec>;
  absent: fc.Arbitrary<BodySpec>;
}

function hostileBodies(op: Operation, opts: SchemaArbOptions, limitBytes: number): HostileBodies {
  const plain = jsonBodyArb(op, opts, 'never').map((b) => b.bytes!);
  return {
    malformed: fc.oneof(
      fc.constantFrom(...MALFORMED_JSON).map((t) => Buffer.from(t, 'utf8')),
      fc.tuple(plain, fc.nat()).map(([b, n]) => b.subarray(0, b.length ? n % b.length : 0)),
    ).map((bytes) => ({ bytes, contentType: 'application/json', label: 'malformed-json' })),
    contentType: fc
      .record({
        contentType: fc.constantFrom('text/plain', 'application/xml', 'multipart/form-data; boundary=X', 'application/x-www-form-urlencoded', 'application/json; charset=utf-16', 'application/json; charset=latin1', 'application/json; charset=utf-7', 'a/b/c', ';', '', 'application/', '*/*', 'json', 'application/octet-stream', 'application/json, text/plain', 'application/json; charset'),
        bytes: fc.oneof(plain, fc.constantFrom('type=core.note&properties[title]=x', '--X\r\nContent-Disposition: form-data; name="type"\r\n\r\ncore.note\r\n--X--\r\n', `a=${pct('\u0000\ud800')}&__proto__[x]=1`).map((s) => Buffer.from(s))),
      })
      .map(({ contentType, bytes }) => ({ bytes, contentType, label: 'content-type' })),
    encoding: fc
      .record({
        encoding: fc.constantFrom(...ENCODINGS),
        payload: fc.constantFrom('plain', 'random', 'truncated-gzip', 'valid-gzip', 'valid-deflate', 'bomb'),
        plain,
        random: fc.uint8Array({ minLength: 1, maxLength: 64 }),
      })
      .map(({ encoding, payload, plain: p, random }) => {
        const bytes =
          payload === 'plain' ? p
          : payload === 'random' ? Buffer.from(random)
          : payload === 'truncated-gzip' ? gzipSync(p).subarray(0, 12)
          : payload === 'valid-gzip' ? gzipSync(p)
          : payload === 'valid-deflate' ? deflateSync(p)
          : gzipBomb();
        return { bytes, contentType: 'application/json', headers: [['Content-Encoding', encoding]] as Array<[string, string]>, label: `content-encoding(${encoding || 'empty'}/${payload})` };
      }),
    badUtf8: fc
      .record({ bad: fc.constantFrom(...BAD_UTF8), where: fc.constantFrom('value', 'key', 'bom', 'utf16') })
      .map(({ bad, where }) => {
        const b = Buffer.from(bad);
        const bytes =
          where === 'value' ? Buffer.concat([Buffer.from('{"type":"core.note","properties":{"title":"'), b, Buffer.from('"}}')])
          : where === 'key' ? Buffer.concat([Buffer.from('{"type":"core.note","properties":{"'), b, Buffer.from('":"x"}}')])
          : where === 'bom' ? Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), Buffer.from('{"type":"core.note"}')])
          : Buffer.from('{"type":"core.note"}', 'utf16le');
        return { bytes, contentType: 'application/json', label: `invalid-utf8(${where})` };
      }),
    size: fc.constantFrom(Math.floor(limitBytes * 0.6), limitBytes + 1, limitBytes * 3).map((size) => ({
      bytes: Buffer.from(toJsonText({ type: 'core.note', properties: { title: 'x'.repeat(size) } })),
      contentType: 'application/json',
      label: size > limitBytes ? 'oversized' : 'large',
    })),
    absent: fc.constantFrom<BodySpec>(
      { label: 'no-body' },
      { bytes: Buffer.alloc(0), contentType: 'application/json', label: 'empty-json-body' },
      { bytes: Buffer.from(toJsonText(deepJson(5000, 'array'))), contentType: 'application/json', label: 'deep-root' },
    ),
  };
}

function blobBodyArb(): fc.Arbitrary<BodySpec> {
  const types = fc.constantFrom(
    undefined, 'application/octet-stream', 'text/plain', 'application/json', 'image/png', '', ';', 'a/b/c', 'text/plain; charset=\u00ff',
    'x'.repeat(3000) + '/y', 'text/plain; ' + 'a=b;'.repeat(400), 'multipart/form-data', 'text/plain; charset=utf-7', 'TEXT/PLAIN', '*/*', 'application/x-www-form-urlencoded',
  );
  return fc.oneof(
    { weight: 4, arbitrary: fc.record({ bytes: fc.uint8Array({ maxLength: 2048 }).map((a) => Buffer.from(a)), contentType: types }).map((b) => ({ ...b, label: 'blob' })) },
    { weight: 2, arbitrary: fc.record({ bytes: hostileString.map((s) => wtf8(s)), contentType: types }).map((b) => ({ ...b, label: 'blob-text' })) },
    { weight: 1, arbitrary: fc.constantFrom('gzip', 'deflate', 'br', 'xz').map((e) => ({ bytes: Buffer.from('not gzip at all'), contentType: 'application/octet-stream', headers: [['Content-Encoding', e]] as Array<[string, string]>, label: `content-encoding(${e})` })) },
    { weight: 1, arbitrary: fc.constant<BodySpec>({ label: 'no-body' }) },
  );
}

interface BodyArbs { valid: fc.Arbitrary<BodySpec>; hostile: fc.Arbitrary<BodySpec>; chaos: fc.Arbitrary<BodySpec> }

function bodyArbs(op: Operation, opts: SchemaArbOptions, limitBytes: number): BodyArbs {
  const none = fc.constant<BodySpec>({ label: 'no-body' });
  if (op.body && !op.body.mediaTypes.includes('application/json')) {
    const ordinary = fc.record({ bytes: fc.uint8Array({ minLength: 1, maxLength: 512 }).map((a) => Buffer.from(a)), contentType: fc.constantFrom('application/octet-stream', 'text/plain') }).map((b) => ({ ...b, label: 'blob' }));
    return { valid: ordinary, hostile: blobBodyArb(), chaos: blobBodyArb() };
  }
  const h = hostileBodies(op, opts, limitBytes);
  const all = [h.malformed, h.contentType, h.encoding, h.badUtf8, h.size, h.absent];
  if (op.body) {
    const bad = fc.oneof({ weight: all.length * 2, arbitrary: jsonBodyArb(op, opts, 'always') }, ...all.map((arbitrary) => ({ weight: 1, arbitrary })));
    return { valid: jsonBodyArb(op, opts, 'never'), hostile: bad, chaos: fc.oneof(jsonBodyArb(op, opts, 'sometimes'), bad) };
  }
  // Routes without a body get one now and then: it must be ignored or refused, never crash.
  const unexpected = fc.oneof(jsonBodyArb(op, opts, 'sometimes'), h.encoding, h.malformed);
  return { valid: none, hostile: unexpected, chaos: fc.oneof({ withCrossShrink: true }, { weight: 8, arbitrary: none }, { weight: 1, arbitrary: unexpected }) };
}

/* ------------------------------------------------------------------------------------------ */
/* Route spelling and methods                                                                   */

type Variant = 'plain' | 'upper' | 'trailing-slash' | 'double-slash' | 'dot-segment' | 'encoded-letter' | 'method-put' | 'method-options' | 'method-propfind' | 'method-lowercase' | 'method-unknown';

const odd: fc.Arbitrary<Variant> = fc.oneof(
  { weight: 2, arbitrary: fc.constantFrom<Variant>('upper', 'trailing-slash', 'double-slash', 'dot-segment', 'encoded-letter') },
  { weight: 1, arbitrary: fc.constantFrom<Variant>('method-put', 'method-options', 'method-propfind', 'method-lowercase', 'method-unknown') },
);
const anyVariant: fc.Arbitrary<Variant> = fc.oneof({ withCrossShrink: true }, { weight: 20, arbitrary: fc.constant<Variant>('plain') }, { weight: 1, arbitrary: odd });

function spell(v: Variant, op: Operation, segments: string[]): { method: string; path: string } {
  const path = '/' + segments.join('/');
  switch (v) {
    case 'upper': return { method: op.method, path: '/' + segments.map((s, i) => (op.path.split('/')[i + 1]?.startsWith('{') ? s : s.toUpperCase())).join('/') };
    case 'trailing-slash': return { method: op.method, path: path + '/' };
    case 'double-slash': return { method: op.method, path: '/' + path };
    case 'dot-segment': return { method: op.method, path: '/.' + path };
    case 'encoded-letter': return { method: op.method, path: path.replace(/^\/([a-z])/, (_m, c: string) => `/%${c.charCodeAt(0).toString(16)}`) };
    case 'method-put': return { method: 'PUT', path };
    case 'method-options': return { method: 'OPTIONS', path };
    case 'method-propfind': return { method: 'PROPFIND', path };
    case 'method-lowercase': return { method: op.method.toLowerCase(), path };
    case 'method-unknown': return { method: 'FUZZ', path };
    default: return { method: op.method, path };
  }
}

/* ------------------------------------------------------------------------------------------ */

export interface World {
  doc: OpenApiDoc;
  ops: Operation[];
  fixtures: Fixtures;
  pools: Pools;
  jsonLimitBytes: number;
}

export function makeWorld(doc: OpenApiDoc, ops: Operation[], fixtures: Fixtures, jsonLimitBytes: number): World {
  return { doc, ops, fixtures, pools: makePools(fixtures), jsonLimitBytes };
}

interface Parts {
  who: { persona: Persona; garbageAuth?: string };
  params: PathValue[];
  query: QueryPart[];
  headers: Array<[string, string]>;
  body: BodySpec;
  variant: Variant;
}

/**
 * Requests with one *focus*: everything valid but one aspect (the credential, a path segment,
 * the query, a header, the body, the route spelling), so that one fault at a time gets past the
 * other checks and reaches the code behind them; plus "chaos" requests where every aspect
 * varies at once, for the interactions. Shrinking stays within the focus it started from.
 */
export function operationArb(op: Operation, w: World): fc.Arbitrary<FuzzRequest> {
  const opts: SchemaArbOptions = { doc: w.doc, hints: makeHints(w.pools) };
  const paramCount = (op.path.match(/\{[^}]+\}/g) ?? []).length;
  const safeParams = fc.tuple(...Array.from({ length: paramCount }, () => safePathParam(op, w.fixtures)));
  const body = bodyArbs(op, opts, w.jsonLimitBytes);
  const valid = {
    who: fc.oneof({ weight: 2, arbitrary: fc.constant({ persona: 'admin' as Persona }) }, { weight: 1, arbitrary: fc.constant({ persona: 'member' as Persona }) }),
    params: safeParams,
    query: validQuery(op, opts),
    headers: headerArb(op, w.fixtures, false),
    body: body.valid,
    variant: fc.constant<Variant>('plain'),
  };
  const focus = (weight: number, override: Partial<{ [K in keyof Parts]: fc.Arbitrary<Parts[K]> }>) => ({ weight, arbitrary: fc.record({ ...valid, ...override }) });
  const hasQuery = op.params.some((p) => p.in === 'query');
  const hasHeaders = op.params.some((p) => p.in === 'header');
  const anyParams = fc.tuple(...Array.from({ length: paramCount }, () => fc.oneof({ weight: 3, arbitrary: safePathParam(op, w.fixtures) }, { weight: 2, arbitrary: hostilePathParam })));
  const arbs = [
    focus(2, {}),
    focus(1, { who: persona }),
    ...(paramCount ? [focus(2, { params: anyParams.filter((ps) => ps.some((p) => p.hostile)) })] : []),
    focus(hasQuery ? 4 : 1, { query: focusedQuery(op, opts) }),
    ...(hasHeaders ? [focus(1, { headers: headerArb(op, w.fixtures, true) })] : []),
    focus(op.body ? 5 : 1, { body: body.hostile }),
    focus(1, { variant: odd }),
    focus(3, { who: persona, params: anyParams, query: chaoticQuery(op, opts), headers: headerArb(op, w.fixtures, true), body: body.chaos, variant: anyVariant }),
  ];
  return fc.oneof(...arbs).map(({ who, params, query, headers, body: b, variant: v }: Parts) => {
    let i = 0;
    const segments = op.path.split('/').slice(1).map((s) => (s.startsWith('{') ? params[i++].value : s));
    const { method, path } = spell(v, op, segments);
    const labels = [b.label, ...(v !== 'plain' ? [v] : []), ...params.filter((p) => p.hostile).map(() => 'hostile-path'), ...new Set(query.map((q) => q.label).filter((l): l is string => !!l))];
    const allHeaders: Array<[string, string]> = [...headers, ...(b.headers ?? [])];
    if (b.contentType !== undefined) allHeaders.unshift(['Content-Type', b.contentType]);
    return withToString({ ...who, method, route: op.id, labels, path, query: renderQuery(query), headers: allHeaders, body: b.bytes });
  });
}

/** Raw protocol-level requests are drawn as often as this many operations. */
const PROTOCOL_WEIGHT = 2;

/**
 * Every operation with equal weight (new routes get their share without configuration), and
 * raw protocol-level requests as often as two operations.
 */
export function requestArb(w: World): fc.Arbitrary<FuzzRequest> {
  const protocol = protocolArb(w.ops, w.fixtures, new URL(w.fixtures.base).host, withToString);
  return fc.oneof(...w.ops.map((op) => ({ weight: 1, arbitrary: operationArb(op, w) })), { weight: PROTOCOL_WEIGHT, arbitrary: protocol });
}

/**
 * The survey length from which every operation is reached but for a chance under 1 in 1000,
 * whatever the seed: requestArb draws a given operation with probability p = 1/(n + 2), so the
 * chance that one of n operations is never drawn in R requests is at most n·(1 − p)^R, and this
 * R keeps it under 0.001 (1257 requests for 107 operations). Below it, an operation not reached
 * says the budget (FUZZ_RUNS) was small, not that the fuzzer has a gap.
 */
export function coverageBudget(operations: number): number {
  const p = 1 / (operations + PROTOCOL_WEIGHT);
  return Math.ceil(Math.log(operations / 0.001) / -Math.log(1 - p));
}