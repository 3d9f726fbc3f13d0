import fc from 'fast-check';
import { BUFFERED_FROM_CHARS, serializeJson, SPLIT_FROM_ELEMENTS } from './json-reply';

const text = (body: string | Buffer) => (typeof body === 'string' ? body : body.toString('utf8'));

/** A page of `n` items shaped as GET /items answers them, `body` characters of text each. */
const page = (n: number, body: string) => ({
  items: Array.from({ length: n }, (_, i) => ({
    id: `id-${i}`,
    type: 'core.note',
    properties: { title: `note ${i}`, body, nested: { list: [1, 2.5, -0, null, 'x'], when: new Date(Date.UTC(2026, 0, i + 1)) } },
    state: 'active',
    source_id: null,
    timestamp: '2026-01-01T00:00:00.000Z',
    edges: i % 2 ? { 'acme.links': ['a', 'b'] } : {},
    extensions: i % 3 ? { 'acme.public': { p: i } } : {},
    ...(i % 4 ? { tags: ['t', `t${i}`] } : {}),
    dropped: undefined,
  })),
  next_cursor: n > 1 ? 'WyJ4Il0' : null,
});

/** A list long enough to be split: the given elements, repeated to SPLIT_FROM_ELEMENTS. */
const long = (...xs: unknown[]): unknown[] => Array.from({ length: SPLIT_FROM_ELEMENTS }, (_, i) => xs[i % xs.length]);

describe('serializeJson', () => {
  it('gives the bytes of JSON.stringify, a large answer as a UTF-8 Buffer and a small one as a string', () => {
    const ascii = 'alpha beta gamma '.repeat(800);
    const unicode = 'café … naïve 🙂 日本語 \u2028 "quoted" \\ \n\t\u0001 '.repeat(300);
    const lone = 'a\ud800b\udfffc';
    for (const value of [page(100, ascii), page(100, unicode), page(60, ascii + lone), page(1, 'small'), page(0, '')]) {
      const body = serializeJson(value);
      expect(typeof body === 'string').toBe(JSON.stringify(value).length < BUFFERED_FROM_CHARS);
      expect(text(body)).toBe(JSON.stringify(value));
      if (Buffer.isBuffer(body)) expect(body.equals(Buffer.from(JSON.stringify(value)))).toBe(true);
    }
  });

  it('leaves an answer without a long list to JSON.stringify, however large', () => {
    const big = 'x'.repeat(BUFFERED_FROM_CHARS);
    for (const value of [page(SPLIT_FROM_ELEMENTS - 1, big), { properties: { text: big }, tags: ['a', 'b'] }]) {
      expect(serializeJson(value)).toBe(JSON.stringify(value));
    }
    expect(Buffer.isBuffer(serializeJson(page(SPLIT_FROM_ELEMENTS, big)))).toBe(true);
  });

  it('keeps what JSON.stringify does with skipped members, holes, top-level arrays and exotic values', () => {
    const big = 'x'.repeat(BUFFERED_FROM_CHARS);
    const fn = () => 1;
    const sparse: unknown[] = [1];
    sparse[3] = 2;
    class Row {
      constructor(readonly id: string, readonly items: unknown[]) {}
    }
    const values: unknown[] = [
      { a: undefined, b: fn, c: Symbol('s'), d: long(undefined, fn, Symbol('s'), sparse), e: big },
      long(big, undefined, { k: fn }, [1, [2]]),
      { list: long(big), 'key "quoted" \u2028': 1, n: NaN, inf: -Infinity, date: new Date(NaN) },
      new Row('r', long(big, new Date(0))),
      Object.assign(Object.create(null), { items: long(big), next: null }),
      null, 'plain', 42, true, undefined, [],
      {}, new Map([['a', 1]]), new Set([1]), new Number(3), new String('s'), new Uint8Array([1, 2]),
    ];
    for (const value of values) expect(text(serializeJson(value) ?? 'undefined')).toBe(JSON.stringify(value) ?? 'undefined');
  });

  it('leaves a value with a toJSON that could read its key to JSON.stringify whole', () => {
    const keyed = { toJSON: (key: string) => `reached as ${key}` };
    class KeyedDate extends Date {
      override toJSON(key?: string): string {
        return `date reached as ${key}`;
      }
    }
    for (const value of [
      { items: long(keyed), big: 'x'.repeat(BUFFERED_FROM_CHARS) },
      { member: keyed, other: long('x'.repeat(BUFFERED_FROM_CHARS)) },
      long(keyed, 'x'.repeat(BUFFERED_FROM_CHARS)),
      keyed,
      { items: long(new KeyedDate(0)), big: 'x'.repeat(BUFFERED_FROM_CHARS) },
      Object.assign([1, 2], { toJSON: () => 'array' }),
    ]) {
      expect(text(serializeJson(value))).toBe(JSON.stringify(value));
    }
  });

  it('equals JSON.stringify for generated values, small and large', () => {
    const anything = fc.anything({
      withBoxedValues: true, withDate: true, withMap: true, withSet: true, withNullPrototype: true, withObjectString: true,
      withSparseArray: true, withTypedArray: true, withUnicodeString: true,
    });
    fc.assert(
      fc.property(anything, fc.integer({ min: 0, max: 3 }), (value, copies) => {
        // Repeated past BUFFERED_FROM_CHARS, so that the Buffer path is taken too.
        const pad = 'p'.repeat(copies ? BUFFERED_FROM_CHARS : 0);
        for (const v of [value, { items: Array(copies * SPLIT_FROM_ELEMENTS).fill(value), pad }, [pad, ...long(value)]]) {
          expect(text(serializeJson(v) ?? 'undefined')).toBe(JSON.stringify(v) ?? 'undefined');
        }
      }),
      { numRuns: 100, seed: 7 },
    );
  });
});
