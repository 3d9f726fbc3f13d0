import { cutChars, cutText, inputIssues, MAX_JSON_DEPTH, textIssue } from './input-policy';

function nested(depth: number): unknown {
  let v: unknown = 'leaf';
  for (let i = 0; i < depth; i++) v = i % 2 ? [v] : { a: v };
  return v;
}

describe('input policy', () => {
  it('accepts ordinary Unicode, including astral characters and controls other than NUL', () => {
    expect(textIssue('héllo 😀 \u200f\u202e\t\u0001')).toBeUndefined();
    expect(inputIssues({ 'ключ': ['😀', { x: 'ok' }], n: 1, b: true, z: null })).toEqual([]);
  });

  it('refuses NUL and unpaired surrogates in values and keys, naming the field', () => {
    expect(inputIssues({ properties: { title: 'a\u0000b' } })).toEqual([{ field: 'properties.title', message: expect.stringContaining('NUL') }]);
    expect(inputIssues({ tags: ['ok', '\ud800'] })).toEqual([{ field: 'tags.1', message: expect.stringContaining('surrogate') }]);
    expect(inputIssues({ p: { ['k\u0000']: 1 } })[0].field).toBe('p."k\\u0000"');
    expect(inputIssues({ p: { ['\udc00']: 1 } })[0].message).toContain('key');
    expect(inputIssues('\u0000')).toEqual([{ field: '(body)', message: expect.any(String) }]);
  });

  it('refuses numbers JSON cannot hold (1e400 parses to Infinity)', () => {
    expect(inputIssues(JSON.parse('{"a":[1e400],"b":-1e400,"c":1e308}'))).toEqual([
      { field: 'a.0', message: expect.any(String) },
      { field: 'b', message: expect.any(String) },
    ]);
  });

  it('makes each -0 a 0, the number PostgreSQL stores, at any depth and in per-element arrays', () => {
    const body = JSON.parse('{"n":-0,"list":[-0,1,{"deep":[-0.0]}],"items":[{"p":-0e0}]}');
    expect(inputIssues(body, '', { perElement: 'items' })).toEqual([]);
    expect(JSON.stringify(body, (_k, v: unknown) => (Object.is(v, -0) ? '-0' : v))).toBe('{"n":0,"list":[0,1,{"deep":[0]}],"items":[{"p":0}]}');
  });

  it('refuses prototype-shaped keys anywhere, and Object.prototype member names at the top', () => {
    expect(inputIssues(JSON.parse('{"properties":{"__proto__":{"x":1}}}'))).toEqual([{ field: 'properties.__proto__', message: expect.stringContaining('reserved') }]);
    expect(inputIssues({ a: { b: { constructor: 1, prototype: 2 } } }).map((i) => i.field)).toEqual(['a.b.constructor', 'a.b.prototype']);
    expect(inputIssues({ toString: 'x', name: 'ok' }).map((i) => i.field)).toEqual(['toString']);
    // Deep too: class-transformer would drop the key silently.
    expect(inputIssues({ properties: { toString: 'x', nested: { valueOf: 1 } } }).map((i) => i.field)).toEqual(['properties.toString', 'properties.nested.valueOf']);
  });

  it('prefixes a path when given one (query and path parameters)', () => {
    expect(inputIssues({ since: 'x\u0000' }, 'query')[0].field).toBe('query.since');
  });

  it(`allows ${MAX_JSON_DEPTH} levels of nesting and refuses the next, without recursing further`, () => {
    expect(inputIssues(nested(MAX_JSON_DEPTH))).toEqual([]);
    expect(inputIssues(nested(MAX_JSON_DEPTH + 1))).toEqual([{ field: expect.any(String), message: expect.stringContaining(String(MAX_JSON_DEPTH)) }]);
    // Built by hand: JSON.parse copes with this depth, recursion would not.
    const deep = JSON.parse('['.repeat(100_000) + ']'.repeat(100_000));
    expect(inputIssues(deep)).toHaveLength(1);
  });

  it('leaves the text of a per-element array to the handler, but still bounds its depth', () => {
    const body = { mode: 'upsert', items: [{ title: '\u0000' }, { ok: 1 }] };
    expect(inputIssues(body, '', { perElement: 'items' })).toEqual([]);
    expect(inputIssues(body)).toHaveLength(1);
    expect(inputIssues({ mode: '\u0000', items: [] }, '', { perElement: 'items' })).toHaveLength(1);
    expect(inputIssues({ items: [nested(MAX_JSON_DEPTH)] }, '', { perElement: 'items' })).toHaveLength(1);
  });

  it('stops collecting after a bounded number of issues', () => {
    const many = Object.fromEntries(Array.from({ length: 500 }, (_, i) => [`f${i}`, '\u0000']));
    expect(inputIssues(many).length).toBeLessThanOrEqual(20);
  });
});

describe('cutText', () => {
  it('keeps short text, cuts long text to the limit, and never ends in half a surrogate pair', () => {
    expect(cutText('abc', 5)).toBe('abc');
    expect(cutText('abcdef', 5)).toBe('abcde');
    expect(cutText('abcd😀x', 5)).toBe('abcd');
    expect(cutText('abc😀x', 5)).toBe('abc😀');
  });
});

describe('cutChars', () => {
  it('keeps text within the limit, counted in code points, and cuts longer text between characters', () => {
    expect(cutChars('😀'.repeat(200), 200)).toBe('😀'.repeat(200));
    expect(cutChars('😀'.repeat(201), 200)).toBe('😀'.repeat(200));
    expect(cutChars('a\ufe0f'.repeat(200), 200)).toBe('a\ufe0f'.repeat(100));
    expect(cutChars('a'.repeat(199) + '😀😀', 200)).toBe('a'.repeat(199) + '😀');
    expect(cutChars('abc', 2)).toBe('ab');
  });
});
