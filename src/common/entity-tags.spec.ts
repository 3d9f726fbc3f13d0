import { namesEntityTag } from './entity-tags';

describe('namesEntityTag', () => {
  it('compares weakly and finds a tag anywhere in the list', () => {
    expect(namesEntityTag('"a", W/"b"', '"b"')).toBe(true);
    expect(namesEntityTag('W/"b"', 'W/"b"')).toBe(true);
    expect(namesEntityTag('"a"', 'W/"a"')).toBe(true);
    expect(namesEntityTag(' * ', '"z"')).toBe(true);
    expect(namesEntityTag('"a", "c"', '"b"')).toBe(false);
    expect(namesEntityTag(undefined, '"b"')).toBe(false);
  });

  it('reads a comma inside a tag as part of it, not as a separator', () => {
    expect(namesEntityTag('"x,y"', '"x,y"')).toBe(true);
    expect(namesEntityTag('"x,y"', '"y"')).toBe(false);
    expect(namesEntityTag('"x, "y"', '"y"')).toBe(false);
  });

  it('does not read an unquoted value as a tag', () => {
    expect(namesEntityTag('b', '"b"')).toBe(false);
    expect(namesEntityTag('', '""')).toBe(false);
  });
});
