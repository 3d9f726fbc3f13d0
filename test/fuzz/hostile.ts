/**
 * Hostile input, as fast-check arbitraries: Unicode that breaks storage and encoders (NUL,
 * lone surrogates, bidi and zero-width marks, noncharacters), injection-shaped strings (SQL,
 * tsquery and LIKE operators, NoSQL operators, path traversal, CRLF header smuggling,
 * prototype keys), odd numbers, borderline date-times and raw percent-encoded URL fragments.
 * Lists are explicit rather than random because each entry targets one known failure mode;
 * fast-check combines and places them.
 */
import fc from 'fast-check';
import { deepJson, pct, RawJson, rawNumber } from './encoding';

/** Strings that storage layers, encoders or JSON handling are known to choke on. */
export const UNICODE_HOSTILE = [
  '\u0000', 'a\u0000b', '\u0000\u0000\u0000',
  '\ud800', '\udfff', 'x\udc00y', '\ud83d', 'end\ud83d',
  '\u202e', 'abc\u202edef', '\u200b', '\u200d', '\ufeff', '\u2028\u2029',
  '\u0001\u0002\u001b[31m', '\u007f', '\u0085', '\r\n', '\t',
  '\ufffd', '\uffff', '\ufffe', '\udbff\udfff', // U+10FFFF, the last code point
  '👩‍👩‍👧‍👦', '🏳️‍🌈', 'e\u0301\u0301\u0301', '𝕏𝔶𝔷', 'ﬁ', 'İ', 'ß', 'Ǆ', '\u0130\u0131',
  'مرحبا بالعالم', 'שָׁלוֹם', '日本語テキスト', 'Ａ１', '\u3000',
];

/** Strings shaped like attacks on the layers behind the API. */
export const INJECTION = [
  "' OR 1=1 --", "'; DROP TABLE items; --", '" OR ""="', "\\'", "1' AND pg_sleep(0)--", '$1', '$$',
  '%00', '%', '_', '%_%', '\\', '\\\\', "''", '`', '${7*7}', '{{7*7}}', '<%= 7*7 %>', '$(id)', '|id',
  '../../../../etc/passwd', '..\\..\\windows', '/etc/passwd%00', '....//', '%2e%2e%2f', '..%252f',
  '{"$gt":""}', '{"$where":"1"}', '[$ne]=1', '*', '*:*', '!', '&', '|', '<->', ':*', '!!a', 'a & | b', '(', ')', '((((',
  '"', '"unterminated', '-', '--', 'or', '-"a"', 'a or -b', '"a" -"a"', '<mark>x</mark>', '<script>alert(1)</script>',
  'x\r\nSet-Cookie: a=b', 'x\r\n\r\nGET / HTTP/1.1', 'x\nX-Injected: 1',
  '__proto__', 'constructor', 'prototype', 'toString', 'hasOwnProperty', 'valueOf',
  'null', 'undefined', 'NaN', 'true', '0', '-1', '1e309', '9007199254740993', '[]', '{}',
  'sha256:' + '0'.repeat(64), 'sha256:' + 'g'.repeat(64), 'svc_k1_', 'svc_at_x', 'Bearer x',
  'core.*', '*.*', 'a..b', '.a', 'A.B', 'a.', 'a b', 'a\tb',
];

/** Object keys that exercise prototype handling and key validation. */
export const HOSTILE_KEYS = [
  '__proto__', 'constructor', 'prototype', 'toString', 'hasOwnProperty', '$gt', '$where', '',
  '\u0000', 'a\u0000b', '\ud800', 'k\udfffk', '\u202e', '\u200b', '👩‍👩‍👧‍👦', 'a.b', 'a b', 'A', "' OR 1=1 --", '../x',
  'x\r\ny', '0', '-1', 'k'.repeat(300),
];

const longString = fc
  .record({
    unit: fc.constantFrom('a', 'é', '😀', '\u0000', '\ud800', ' ', '%', "'", 'ab\u200b'),
    length: fc.constantFrom(1000, 10_000, 100_000, 300_000),
  })
  .map(({ unit, length }) => unit.repeat(Math.ceil(length / unit.length)));

/** A string made of hostile pieces, optionally embedded in ordinary text. */
export const hostileString: fc.Arbitrary<string> = fc.oneof(
  { weight: 4, arbitrary: fc.constantFrom(...UNICODE_HOSTILE) },
  { weight: 4, arbitrary: fc.constantFrom(...INJECTION) },
  {
    weight: 3,
    arbitrary: fc
      .tuple(fc.constantFrom('', 'title ', 'x'), fc.array(fc.constantFrom(...UNICODE_HOSTILE, ...INJECTION), { minLength: 1, maxLength: 3 }), fc.constantFrom('', ' end'))
      .map(([a, mid, b]) => a + mid.join('') + b),
  },
  // Arbitrary code units, surrogate halves included (what a broken client would send).
  { weight: 2, arbitrary: fc.string({ unit: fc.integer({ min: 0, max: 0xffff }).map((c) => String.fromCharCode(c)), minLength: 1, maxLength: 12 }) },
  { weight: 1, arbitrary: longString },
);

/** Numbers JSON can carry but JS (or PostgreSQL) handle oddly. */
export const hostileNumber: fc.Arbitrary<number | RawJson> = fc.oneof(
  fc.constantFrom<number | RawJson>(
    0, -1, 1.5, -0.0001, 2 ** 31, 2 ** 31 - 1, -(2 ** 31), 2 ** 53, Number.MAX_SAFE_INTEGER, Number.MIN_VALUE, 1e308,
    rawNumber('1e400'), rawNumber('-1e400'), rawNumber('-0'), rawNumber('1e-400'), rawNumber('123456789012345678901234567890'),
    rawNumber('1.0'), rawNumber('1E2'), rawNumber('0.1e1'),
  ),
  fc.double({ noNaN: true, noDefaultInfinity: true }),
);

/** A value of any JSON type, for "wrong type" mutations. */
export const wrongTypedValue: fc.Arbitrary<unknown> = fc.oneof(
  fc.constantFrom<unknown>(null, true, false, 0, -1, 1.5, '', 'x', [], {}, [null], [[]], { $gt: '' }, JSON.parse('{"__proto__":{"polluted":true}}'), ['a', 1, null]),
  hostileNumber,
  hostileString,
);

/** Nesting far deeper than any sane document, from "deep" to "thousands of levels". */
export const deepNesting: fc.Arbitrary<RawJson> = fc
  .record({
    depth: fc.oneof(fc.integer({ min: 65, max: 1000 }), fc.integer({ min: 1000, max: 20_000 }), fc.constantFrom(50_000, 100_000)),
    shape: fc.constantFrom<'array' | 'object' | 'mixed'>('array', 'object', 'mixed'),
  })
  .map(({ depth, shape }) => deepJson(shape === 'array' ? depth : Math.min(depth, 60_000), shape));

/**
 * Raw (already encoded) URL fragments: invalid percent-encoding, encoded NUL and CRLF,
 * WTF-8 surrogates, overlong UTF-8, dot segments and encoded slashes.
 */
export const RAW_URL_TOKENS = [
  '%00', '%ZZ', '%', '%2', '%G0', '%E0%A4%A', '%ED%A0%80', '%ED%BF%BF', '%C0%AF', '%C0%80', '%FF', '%FE%FF', '%F4%90%80%80',
  '%2F', '%2f..%2f', '%2e%2e', '%2E', '..', '.', '%252e', '%5C', '%0D%0ASet-Cookie:%20a=b', '%0A', '%20', '+', '%2B',
  ';a=b', '%3B', '*', '~', '%E2%80%AE', '%EF%BB%BF', '%F0%9F%98%80',
];

/** A path segment: hostile text percent-encoded, or a raw token, or both glued together. */
export const hostileSegment: fc.Arbitrary<string> = fc.oneof(
  { weight: 3, arbitrary: hostileString.map((s) => pct(s.length > 20_000 ? s.slice(0, 20_000) : s)) },
  { weight: 3, arbitrary: fc.constantFrom(...RAW_URL_TOKENS) },
  { weight: 1, arbitrary: fc.tuple(fc.constantFrom('x', '123e4567-e89b-12d3-a456-426614174000', ''), fc.constantFrom(...RAW_URL_TOKENS)).map(([a, b]) => a + b) },
  { weight: 1, arbitrary: fc.constantFrom(1000, 17_000, 70_000).map((n) => 'a'.repeat(n)) },
);

/** Date-times: valid RFC 3339 at the edges of what storage handles, and near misses. */
export const RFC3339_EDGE = [
  '0001-01-01T00:00:00Z', '9999-12-31T23:59:59.999999Z', '1970-01-01T00:00:00.123456789Z', '2016-12-31T23:59:60Z',
  '2020-02-29T12:00:00+14:00', '2020-01-01T00:00:00-23:59', '2020-01-01t00:00:00z', '2024-06-30T23:59:60.5+00:00',
  // At the ends of the four-digit years, an offset moves the instant out of them.
  '0001-01-01T00:00:00+14:00', '9999-12-31T23:59:59-14:00', '1969-12-31T23:59:59.999Z',
  // RFC 3339 allows offsets up to ±23:59; storage layers often stop at ±14:00 or ±15:59.
  '2020-06-15T12:00:00+16:00', '2020-06-15T12:00:00-23:59',
];
export const NOT_RFC3339 = [
  '2020', '2020-01', '2020-01-01', '2020-W01', '2020-W01-1', '2020-123', '20200101T000000Z', '2020-01-01T00:00:00',
  '2020-01-01 00:00:00Z', '2020-02-30T00:00:00Z', '2021-02-29T00:00:00Z', '2020-13-01T00:00:00Z', '2020-01-01T24:00:00Z',
  '2020-01-01T00:00:00+24:00', '+002020-01-01T00:00:00Z', '-000001-01-01T00:00:00Z', '+275760-09-13T00:00:00Z',
  '1', '0', '-1', '1e12', 'now', 'today', 'Tue, 01 Jan 2020 00:00:00 GMT', '2020-01-01T00:00:00.Z', ' 2020-01-01T00:00:00Z',
];

/** Spellings of an integer that a strict decimal parser refuses. */
export const LENIENT_INTEGERS = ['0x10', '0X1f', '0b101', '0o17', ' 16', '16 ', '\t16', '16\n', '', '+16', '016', '1_0', 'Infinity', '-Infinity', 'NaN', '16abc', '1,5', '٣'];

/** Spellings of an enum member that a strict parser refuses. */
export const enumVariants = (value: string): string[] => [value.toUpperCase(), ` ${value}`, `${value} `, `${value}\u0000`, `${value},${value}`, value.slice(0, -1)];
