/**
 * What every response must satisfy, and what a request contained (its features), so that
 * failures group into defect classes:
 *
 *  - `5xx`: no input may make the service fail (status < 500);
 *  - `no-response`: the connection must end with a complete HTTP response (`http`: and a
 *    response to HEAD has no body);
 *  - `envelope`: every status >= 400 (except to HEAD) is application/json with exactly
 *    `{"error":{"code","message","details"?}}`, except where the operation declares another
 *    form (`x-error-format`): `oauth` (RFC 6749: `{"error","error_description"?}`) or `html`
 *    (a text/html page, for the browser pages);
 *  - `request-id`: every response carries X-Request-Id (README, "Logs");
 *  - `leak`: no response to tenant A or to nobody contains an id or canary of tenant B that the
 *    request did not itself contain (echoing the caller's own input is not a leak); opaque
 *    base64url tokens such as cursors are decoded and searched too; tenant B's id and name are
 *    the root admin's to read where it lists tenants and their creation (Secret.rootAdminReads);
 *  - `accepts-invalid`: input that the OpenAPI document (or the README's "unknown fields are
 *    400") says is invalid must not get a 2xx: query and header values are judged with strict
 *    parsers written here, JSON bodies with ajv against the operation's request-body schema;
 *  - `response-schema`: a 2xx JSON body matches the response schema the document gives.
 */
import Ajv2020 from 'ajv/dist/2020';
import addFormats from 'ajv-formats';
import { addManifestFormats } from '../../src/integrations/manifest-schema';
import type { ValidateFunction } from 'ajv';
import { brotliDecompressSync, gunzipSync, inflateSync } from 'node:zlib';
import { hasLoneSurrogate, splitQuery, strictDecode } from './encoding';
import { Fixtures } from './fixtures';
import { FuzzResponse } from './http';
import { inline, OpenApiDoc, Operation, Param, Schema } from './openapi';
import { FuzzRequest } from './requests';

export type OracleName = '5xx' | 'no-response' | 'http' | 'envelope' | 'request-id' | 'leak' | 'accepts-invalid' | 'response-schema';

export interface Finding {
  oracle: OracleName;
  /** What exactly, stable enough to group by (e.g. "content-type: text/plain", "query.limit"). */
  subtype: string;
  detail: string;
}

/* ------------------------------------------------------------------------------------------ */
/* Strict judgement of input against the document                                              */

const RFC3339_RE = /^(\d{4})-(\d\d)-(\d\d)[Tt](\d\d):(\d\d):(\d\d)(\.\d+)?([Zz]|[+-](\d\d):(\d\d))$/;
// JSON's number grammar, but with leading zeros: the README calls "016" plain decimal digits.
const NUMBER_RE = /^-?\d+(\.\d+)?([eE][+-]?\d+)?$/;

export function isRfc3339(s: string): boolean {
  const m = RFC3339_RE.exec(s);
  if (!m) return false;
  const [y, mo, d, h, mi, sec] = m.slice(1, 7).map(Number);
  const days = [31, y % 4 === 0 && (y % 100 !== 0 || y % 400 === 0) ? 29 : 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31][mo - 1];
  const offOk = !m[9] || (Number(m[9]) <= 23 && Number(m[10]) <= 59);
  return mo >= 1 && mo <= 12 && d >= 1 && d <= days && h <= 23 && mi <= 59 && sec <= 60 && offOk;
}

/** true = conforms, false = does not, undefined = this judge cannot tell. */
export function conforms(schema: Schema, value: string): boolean | undefined {
  if (Array.isArray(schema.enum)) return schema.enum.map(String).includes(value);
  switch (schema.type) {
    case 'number':
    case 'integer': {
      if (!NUMBER_RE.test(value)) return false;
      const n = Number(value);
      if (!Number.isFinite(n)) return false;
      if (schema.type === 'integer' && !Number.isInteger(n)) return false;
      if (schema.minimum !== undefined && n < schema.minimum) return false;
      if (schema.maximum !== undefined && n > schema.maximum) return false;
      return true;
    }
    case 'boolean':
      return value === 'true' || value === 'false';
    case 'string': {
      const length = [...value].length;
      if (schema.minLength !== undefined && length < schema.minLength) return false;
      if (schema.maxLength !== undefined && length > schema.maxLength) return false;
      if (schema.pattern && !new RegExp(schema.pattern, 'u').test(value)) return false;
      // RFC 3339 lets applications use a space for the "T"; that spelling gets no verdict.
      if (schema.format === 'date-time') return isRfc3339(value) || (isRfc3339(value.replace(' ', 'T')) ? undefined : false);
      return true;
    }
    default:
      return undefined;
  }
}

/** Reasons the query string is invalid by the document; [] when valid or undecidable. */
export function queryViolations(op: Operation, query: string): string[] {
  const declared = new Map<string, Param>(op.params.filter((p) => p.in === 'query').map((p) => [p.name, p]));
  const seen = new Map<string, string[]>();
  const out: string[] = [];
  for (const [rawName, rawValue] of splitQuery(query)) {
    const name = strictDecode(rawName, true);
    const value = rawValue === undefined ? { ok: true as const, text: '' } : strictDecode(rawValue, true);
    if (!name.ok || !value.ok) return []; // a server may reject or repair undecodable input: no verdict
    if (name.text === '') continue; // "&&", "=x": parsers differ on empty names, no verdict
    if (!declared.has(name.text)) {
      // Only where the operation validates a query object at all (README: unknown fields are
      // 400, as GET /keys?colour=red is); a route without parameters may ignore a query, and a
      // browser page ignores what it does not know, as pages do (a link may carry tracking ones).
      if (!declared.size || op.errorFormat === 'html' || op.ignoresUnknownQuery) continue;
      out.push(`query.${name.text.slice(0, 40)}: unknown parameter`);
      continue;
    }
    seen.set(name.text, [...(seen.get(name.text) ?? []), value.text]);
  }
  for (const [name, p] of declared) {
    const values = seen.get(name);
    if (!values) {
      if (p.required) out.push(`query.${name}: required parameter missing`);
      continue;
    }
    const isArray = p.schema.type === 'array';
    if (!isArray && values.length > 1) continue; // repeated scalar: no agreed meaning, no verdict
    for (const v of values) {
      if (conforms(isArray ? p.schema.items ?? {} : p.schema, v) === false) out.push(`query.${name}: ${JSON.stringify(v.slice(0, 40))} does not conform`);
    }
  }
  return out;
}

export function headerViolations(op: Operation, headers: Array<[string, string]>): string[] {
  const out: string[] = [];
  for (const p of op.params.filter((x) => x.in === 'header')) {
    const h = headers.find(([k]) => k.toLowerCase() === p.name.toLowerCase());
    if (!h) continue;
    // The HTTP parser strips optional whitespace around a header value.
    const v = h[1].replace(/^[ \t]+|[ \t]+$/g, '');
    if (/[^\x20-\x7e]/.test(v)) continue; // non-ASCII header bytes: no verdict
    if (conforms(p.schema, v) === false) out.push(`header.${p.name}: ${JSON.stringify(v.slice(0, 40))} does not conform`);
  }
  return out;
}

const JSON_MEDIA = /^application\/(json|[^;\s]+\+json)\s*(;\s*charset="?utf-8"?\s*)?$/i;

/**
 * Where the service documents a different contract than "invalid body → 4xx": a bad element of
 * POST /items/bulk is a per-element error in a 200 (README, "Each element is validated and
 * written on its own").
 */
const BODY_EXEMPTIONS: Record<string, RegExp> = {
  'POST /items/bulk': /^\/items\/\d+/,
};

export class BodyJudge {
  private readonly ajv = new Ajv2020({ strict: false, allErrors: true, validateFormats: true });
  private readonly cache = new Map<string, ValidateFunction>();

  constructor(private readonly doc: OpenApiDoc) {
    addFormats(this.ajv);
    // The document's own formats (the manifest's), as the service checks them.
    addManifestFormats(this.ajv);
  }

  /** Reasons the body is invalid by the operation's schema; [] when valid or undecidable. */
  violations(op: Operation, r: FuzzRequest): string[] {
    if (!op.body?.mediaTypes.includes('application/json')) return [];
    const ct = r.headers.find(([k]) => k.toLowerCase() === 'content-type')?.[1];
    if (r.headers.some(([k]) => k.toLowerCase() === 'content-encoding')) return [];
    if (r.body === undefined || r.body.length === 0) return ct === undefined && op.body.required ? ['body: required but absent'] : [];
    if (!ct || !JSON_MEDIA.test(ct)) return [];
    let value: unknown;
    try {
      value = JSON.parse(new TextDecoder('utf-8', { fatal: true }).decode(r.body));
    } catch {
      return [];
    }
    let validate = this.cache.get(op.id);
    if (!validate) {
      validate = this.ajv.compile(inline(this.doc, op.body.schema));
      this.cache.set(op.id, validate);
    }
    try {
      validate(value);
    } catch {
      return []; // e.g. recursion on absurd nesting: no verdict
    }
    const errors = (validate.errors ?? []).filter((e) => !(BODY_EXEMPTIONS[op.id]?.test(e.instancePath) ?? false));
    return [...errors.map((e) => `body${e.instancePath.replace(/\//g, '.')}: ${e.message}`), ...this.unknownFields(op, value)];
  }

  /**
   * Unknown fields of a body whose schema leaves `additionalProperties` unsaid (DTO bodies say
   * `false`, and ajv reports theirs): the README refuses them everywhere ("Invalid fields,
   * unknown fields included: 400"), e.g. `nickname` on POST /keys.
   */
  private unknownFields(op: Operation, value: unknown): string[] {
    const schema = op.body?.schema;
    if (!schema?.properties || schema.additionalProperties !== undefined) return [];
    if (!value || typeof value !== 'object' || Array.isArray(value)) return [];
    return Object.keys(value).filter((k) => !Object.hasOwn(schema.properties, k)).map((k) => `body.${k.slice(0, 40)}: unknown field`);
  }
}

/**
 * 2xx JSON bodies against the response schema the document gives for that status: what the
 * service returns must be what it promises (e.g. every `format: date-time` an RFC 3339 string).
 */
export class ResponseJudge {
  private readonly ajv = new Ajv2020({ strict: false, allErrors: true, validateFormats: true });
  private readonly cache = new Map<string, ValidateFunction | null>();

  constructor(private readonly doc: OpenApiDoc) {
    addFormats(this.ajv);
    // The document's own formats (the manifest's), as the service checks them.
    addManifestFormats(this.ajv);
  }

  violations(op: Operation, status: number, res: FuzzResponse): string[] {
    if (!/^application\/json/i.test(String(res.headers['content-type'] ?? ''))) return [];
    const key = `${op.id} ${status}`;
    let validate = this.cache.get(key);
    if (validate === undefined) {
      const schema = this.doc.paths[op.path]?.[op.method.toLowerCase()]?.responses?.[String(status)]?.content?.['application/json']?.schema;
      validate = schema ? this.ajv.compile(inline(this.doc, schema)) : null;
      this.cache.set(key, validate);
    }
    if (!validate) return [];
    let body: unknown;
    try {
      body = JSON.parse(res.body.toString('utf8'));
    } catch {
      return ['response: 2xx body is not JSON'];
    }
    if (validate(body)) return [];
    return (validate.errors ?? []).slice(0, 3).map((e) => `response${e.instancePath.replace(/\/\d+/g, '/N').replace(/\//g, '.')}: ${e.message} (got ${JSON.stringify(valueAt(body, e.instancePath))?.slice(0, 60)})`);
  }
}

function valueAt(v: unknown, pointer: string): unknown {
  return pointer.split('/').slice(1).reduce<unknown>((o, k) => (o && typeof o === 'object' ? (o as Record<string, unknown>)[k] : undefined), v);
}

/* ------------------------------------------------------------------------------------------ */
/* The oracles                                                                                 */

/** The operation's declared error form, or (refused before reaching it) the envelope. */
function errorFormProblem(res: FuzzResponse, format: Operation['errorFormat'] = 'envelope'): string | undefined {
  const envelope = envelopeProblem(res);
  if (format === 'envelope' || !envelope) return envelope;
  return envelopeProblem(res, format) && envelope;
}

function envelopeProblem(res: FuzzResponse, format: Operation['errorFormat'] = 'envelope'): string | undefined {
  const ct = String(res.headers['content-type'] ?? '');
  if (format === 'html') return /^text\/html(\s*;|$)/i.test(ct) ? undefined : `content-type: ${ct || '(none)'}`;
  if (!/^application\/json(\s*;|$)/i.test(ct)) return `content-type: ${ct || '(none)'}`;
  let body: any;
  try {
    body = JSON.parse(res.body.toString('utf8'));
  } catch {
    return 'body is not JSON';
  }
  const plain = (v: unknown) => !!v && typeof v === 'object' && !Array.isArray(v);
  if (!plain(body)) return 'body is not an object';
  const top = Object.keys(body);
  if (format === 'oauth') return typeof body.error === 'string' && /^[\x20-\x7e]+$/.test(body.error) ? undefined : 'no RFC 6749 error code';
  if (top.length !== 1 || top[0] !== 'error') return `top-level fields: ${top.join(',')}`;
  const e = body.error;
  if (!plain(e)) return 'error is not an object';
  const extra = Object.keys(e).filter((k) => !['code', 'message', 'details'].includes(k));
  if (extra.length) return `error has extra fields: ${extra.join(',')}`;
  if (typeof e.code !== 'string' || !e.code) return 'error.code is not a non-empty string';
  if (typeof e.message !== 'string') return 'error.message is not a string';
  if ('details' in e && !plain(e.details)) return 'error.details is not an object';
  return undefined;
}

/** The body as text, plus the decoded content of every base64url-looking token in it. */
function searchableText(body: Buffer): string {
  const text = body.toString('utf8');
  const decoded: string[] = [];
  const tokens = text.match(/[A-Za-z0-9_-]{16,4096}/g) ?? [];
  for (const t of tokens.slice(0, 500)) decoded.push(Buffer.from(t, 'base64url').toString('latin1'));
  return (text + '\n' + decoded.join('\n')).toLowerCase();
}

/** The body as the server may have inflated it (a compressed body hides the ids it names). */
function inflated(body: Buffer): string {
  for (const inflate of [gunzipSync, inflateSync, brotliDecompressSync]) {
    try {
      return inflate(body, { maxOutputLength: 16 * 1024 * 1024 }).toString('utf8');
    } catch {
      // not this encoding
    }
  }
  return '';
}

/** Everything the request carried, in every form the server might echo it back. */
function requestText(r: FuzzRequest): string {
  const target = r.path + '?' + r.query;
  const body = r.body ? [r.body.toString('utf8'), r.body.toString('latin1'), inflated(r.body)] : r.raw ? [r.raw.toString('latin1')] : [];
  const parts = [target, ...body, ...r.headers.map(([k, v]) => `${k}: ${v}`), r.garbageAuth ?? ''];
  try {
    parts.push(decodeURIComponent(target.replace(/\+/g, ' ')));
  } catch {
    parts.push(target.replace(/%([0-9A-Fa-f]{2})/g, (_m, h: string) => String.fromCharCode(parseInt(h, 16))));
  }
  return parts.join('\n').toLowerCase();
}

export function errorCode(res: FuzzResponse): string {
  try {
    const code = JSON.parse(res.body.toString('utf8'))?.error?.code;
    return typeof code === 'string' ? code : '-';
  } catch {
    return '-';
  }
}

export interface CheckContext {
  fixtures: Fixtures;
  opsById: Map<string, Operation>;
  bodyJudge: BodyJudge;
  responseJudge: ResponseJudge;
}

export function check(r: FuzzRequest, res: FuzzResponse, ctx: CheckContext): Finding[] {
  const out: Finding[] = [];
  if (res.error) {
    // node's client reads the bytes after a HEAD response's headers as a second response.
    if (r.method.toUpperCase() === 'HEAD' && /Data after|HPE_/.test(res.error)) out.push({ oracle: 'http', subtype: 'response to HEAD carries a body', detail: res.error });
    else out.push({ oracle: 'no-response', subtype: res.error.replace(/\d+/g, 'N'), detail: res.error });
    return out;
  }
  if (res.status >= 500) out.push({ oracle: '5xx', subtype: `${res.status} ${errorCode(res)}`, detail: res.body.toString('utf8').slice(0, 500) });
  const head = r.method.toUpperCase() === 'HEAD';
  if (res.status >= 400 && !head) {
    const problem = errorFormProblem(res, ctx.opsById.get(r.route)?.errorFormat);
    if (problem) out.push({ oracle: 'envelope', subtype: problem.replace(/\d+/g, 'N').slice(0, 80), detail: problem });
  }
  if (!res.headers['x-request-id']) out.push({ oracle: 'request-id', subtype: 'missing X-Request-Id', detail: `status ${res.status}` });
  if (!head && res.body.length) {
    const text = searchableText(res.body);
    const sent = requestText(r);
    for (const s of ctx.fixtures.secrets) {
      if (r.persona === 'admin' && s.rootAdminReads?.test(r.route)) continue;
      const v = s.value.toLowerCase();
      if (text.includes(v) && !sent.includes(v)) out.push({ oracle: 'leak', subtype: s.kind, detail: `response contains tenant B's ${s.kind} ${s.value}` });
    }
  }
  if (res.status >= 200 && res.status < 300 && !r.raw) {
    const op = ctx.opsById.get(r.route);
    if (op && r.method.toUpperCase() === op.method) {
      const reasons = [...queryViolations(op, r.query), ...headerViolations(op, r.headers), ...ctx.bodyJudge.violations(op, r)];
      if (reasons.length) out.push({ oracle: 'accepts-invalid', subtype: reasons[0].replace(/: .*$/, ''), detail: reasons.join('; ') });
      const wrong = ctx.responseJudge.violations(op, res.status, res);
      if (wrong.length) out.push({ oracle: 'response-schema', subtype: wrong[0].replace(/ \(got .*$/, ''), detail: wrong.join('; ') });
    }
  }
  return out;
}

/* ------------------------------------------------------------------------------------------ */
/* Features: what the request contained, to name a defect class                                */

function walkJson(v: unknown, depth: number, acc: Set<string>, maxDepth: { d: number }): void {
  maxDepth.d = Math.max(maxDepth.d, depth);
  if (depth > 2000) return; // deep enough to name the class; recursing further would overflow our own stack
  if (typeof v === 'string') stringFeatures(v, acc);
  else if (v && typeof v === 'object') {
    for (const [k, child] of Object.entries(v)) {
      if (!Array.isArray(v)) {
        stringFeatures(k, acc, 'key');
        if (['__proto__', 'constructor', 'prototype'].includes(k)) acc.add('prototype-key');
        if (k.startsWith('$')) acc.add('operator-key');
      }
      walkJson(child, depth + 1, acc, maxDepth);
    }
  }
}

function stringFeatures(s: string, acc: Set<string>, where = 'string'): void {
  if (s.includes('\u0000')) acc.add(`NUL in ${where}`);
  if (hasLoneSurrogate(s)) acc.add(`lone surrogate in ${where}`);
  if (/[\u0001-\u0008\u000b\u000c\u000e-\u001f\u007f]/.test(s)) acc.add(`control char in ${where}`);
  if (/[\u200b-\u200f\u202a-\u202e\u2066-\u2069\ufeff]/.test(s)) acc.add(`bidi/zero-width in ${where}`);
  if (/[\ufffe\uffff]/.test(s)) acc.add(`noncharacter in ${where}`);
  if (s.length > 10_000) acc.add(`long ${where}`);
}

export function features(r: FuzzRequest): string[] {
  const acc = new Set<string>();
  for (const [label, raw] of [['path', r.path], ['query', r.query]] as const) {
    if (!raw) continue;
    if (/%(?![0-9A-Fa-f]{2})/.test(raw)) acc.add(`bad percent-encoding in ${label}`);
    if (/%ED%[AB][0-9A-F]/i.test(raw)) acc.add(`lone surrogate (WTF-8) in ${label}`);
    const d = strictDecode(raw, label === 'query');
    if (d.ok) {
      if (d.text.includes('\u0000')) acc.add(`NUL in ${label}`);
      if (/[\u0001-\u001f\u007f]/.test(d.text)) acc.add(`control char in ${label}`);
    } else if (d.reason === 'invalid-utf8' && !/%ED%[AB]/i.test(raw)) acc.add(`invalid UTF-8 in ${label}`);
    if (raw.length > 8000) acc.add(`long ${label}`);
  }
  // Date-times at the edges: offsets past ±15:59, years 0001 and 9999.
  const query = strictDecode(r.query, true);
  const text = `${query.ok ? query.text : r.query}\n${r.body?.toString('utf8') ?? ''}`;
  if (/\d\d:\d\d(?:\.\d+)?[+-](1[6-9]|2\d):\d\d/.test(text)) acc.add('UTC offset beyond ±15:59');
  if (/\b(0001|9999)-\d\d-\d\dT/.test(text)) acc.add('date-time in year 0001 or 9999');
  const header = (n: string) => r.headers.find(([k]) => k.toLowerCase() === n)?.[1];
  const ce = header('content-encoding');
  if (ce !== undefined) acc.add(`Content-Encoding: ${ce}`);
  const ct = header('content-type');
  if (r.body && ct !== undefined && !JSON_MEDIA.test(ct) && !/^application\/json/i.test(ct)) acc.add(`Content-Type: ${ct.slice(0, 40)}`);
  if (r.body && ce === undefined) {
    let parsed: unknown;
    let ok = true;
    try {
      parsed = JSON.parse(new TextDecoder('utf-8', { fatal: true }).decode(r.body));
    } catch {
      ok = false;
    }
    if (ok) {
      const max = { d: 0 };
      walkJson(parsed, 0, acc, max);
      if (max.d > 64) acc.add(max.d > 1000 ? 'nesting > 1000' : 'nesting > 64');
    } else if (ct === undefined || /json/i.test(ct)) acc.add('body is not UTF-8 JSON');
    if (r.body.length > 1024 * 1024) acc.add('body > 1 MiB');
  }
  for (const l of r.labels) if (/^method-|^protocol: |^(upper|trailing-slash|double-slash|dot-segment|encoded-letter)$/.test(l)) acc.add(l);
  if (r.persona === 'garbage') acc.add('garbage credential');
  return [...acc].sort();
}
