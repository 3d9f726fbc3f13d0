import { inParts, STATEMENT_JSON_CHARS } from './item-writer';

describe('inParts: a batch cut to what one statement carries', () => {
  const weight = (n: number) => n;

  it('keeps a batch within the limit whole, and cuts a heavier one in order without losing or repeating any', () => {
    expect(inParts([1, 2, 3], weight, 10)).toEqual([[1, 2, 3]]);
    expect(inParts([4, 4, 4, 4, 1], weight, 10)).toEqual([[4, 4], [4, 4, 1]]);
    expect(inParts([], weight, 10)).toEqual([]);
  });

  it('gives an element heavier than the limit a part of its own', () => {
    expect(inParts([2, 30, 2, 2], weight, 10)).toEqual([[2], [30], [2, 2]]);
  });

  it('cuts a chunk of 500 items of nearly 1 MB into parts under 96 MB of UTF-8', () => {
    const items = Array.from({ length: 500 }, (_, i) => ({ i, chars: 900_000 }));
    const parts = inParts(items, (x) => x.chars, STATEMENT_JSON_CHARS);
    expect(parts.flat().map((x) => x.i)).toEqual(items.map((x) => x.i));
    for (const part of parts) expect(part.length * 900_000).toBeLessThanOrEqual(STATEMENT_JSON_CHARS);
    expect(parts.length).toBeGreaterThan(1);
  });
});
