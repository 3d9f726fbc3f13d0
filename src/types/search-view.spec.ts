import { sameSearchView } from './search-view';

const str = { type: 'string' };

describe('sameSearchView', () => {
  it.each<[string, Record<string, unknown>, Record<string, unknown>]>([
    ['properties added or retyped, none unsearchable', { properties: { a: str } }, { properties: { a: { type: ['string', 'null'] }, b: str }, required: ['a'] }],
    ['an unsearchable property kept while others change', { properties: { a: { ...str, searchable: false } } }, { properties: { a: { searchable: false, maxLength: 9 }, b: str } }],
    ['"searchable": true said or not', { properties: { a: str } }, { properties: { a: { ...str, searchable: true } } }],
    ['a root "searchable", which search never reads', { properties: {} }, { properties: {}, searchable: false }],
  ])('same: %s', (_, a, b) => {
    expect(sameSearchView(a, b)).toBe(true);
  });

  it.each<[string, Record<string, unknown>, Record<string, unknown>]>([
    ['a property made unsearchable', { properties: { a: str } }, { properties: { a: { ...str, searchable: false } } }],
    ['a nested one', { properties: { o: { properties: { x: str } } } }, { properties: { o: { properties: { x: { searchable: false } } } } }],
    ['under items', { properties: { l: { items: str } } }, { properties: { l: { items: { searchable: false } } } }],
    ['a property added where additionalProperties was unsearchable', { additionalProperties: { searchable: false } }, { properties: { a: str }, additionalProperties: { searchable: false } }],
    ['additionalProperties made unsearchable', { properties: { a: str } }, { properties: { a: str }, additionalProperties: { searchable: false } }],
  ])('different: %s', (_, a, b) => {
    expect(sameSearchView(a, b)).toBe(false);
  });
});
