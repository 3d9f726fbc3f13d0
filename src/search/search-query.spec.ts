import { COMMON_WORDS_0700 } from '../database/migrations/1732300000700-search-common-grams';
import { COMMON_WORDS } from './common-words';
import { matchClause, parseSearch, tsquerySql } from './search-query';

describe('search query', () => {
  describe('prefix word', () => {
    it.each([
      ['hel', 'hel'],
      ['hello wor', 'wor'],
      ['  hello   Wor  ', 'Wor'],
      ['a or b', 'b'],
      ['"exact phrase" abc123', 'abc123'],
      ['café crè', 'crè'],
    ])('%j → %j', (q, prefix) => {
      expect(parseSearch(q).prefix).toBe(prefix);
    });

    it.each([
      ['inside a closed phrase', '"hello wor"'],
      ['inside an unclosed phrase', 'x "hello wor'],
      ['negated', 'hello -wor'],
      ['negated by a lone minus', 'hello - wor'],
      ['the word or', 'cats or'],
      ['punctuation in the word', 'e-mail'],
      ['a dotted word', 'foo.bar'],
      ['an apostrophe', "it's"],
      ['nothing', ''],
    ])('none when %s', (_what, q) => {
      expect(parseSearch(q).prefix).toBeUndefined();
    });
  });

  it('collects positive words, exclusions and phrases for the fallback', () => {
    expect(parseSearch('helo wrold')).toMatchObject({ positive: ['helo', 'wrold'], excluded: '', phrase: false });
    expect(parseSearch('helo -world -"big dog" or cat')).toMatchObject({
      positive: ['helo', 'cat'],
      excluded: '"world" or "big dog"',
      phrase: false,
    });
    expect(parseSearch('"red apple" pie')).toMatchObject({ positive: ['red', 'apple', 'pie'], phrase: true });
    expect(parseSearch('-"red apple" pie')).toMatchObject({ positive: ['pie'], phrase: false });
    // `or` is an operator only between two operands.
    expect(parseSearch('or cat').positive).toEqual(['or', 'cat']);
    expect(parseSearch('cat or').positive).toEqual(['cat', 'or']);
    expect(parseSearch('!!! ??').positive).toEqual([]);
  });

  it('puts user text only into parameters', () => {
    const params: unknown[] = ['tenant'];
    const q = `x'); DROP TABLE items; hel`;
    const sql = tsquerySql(q, params);
    expect(sql).not.toContain('DROP');
    expect(sql).toContain('$2');
    expect(sql).toContain('$3');
    expect(params).toEqual(['tenant', q, 'hel']);
  });

  it('rewrites the last word to a prefix only when there is one', () => {
    expect(tsquerySql('"a b"', [])).toBe(`websearch_to_tsquery('simple', $1)`);
    expect(tsquerySql('a b', [])).toContain('ts_rewrite(');
  });

  it('matchClause is the same engine against an alias', () => {
    const params: unknown[] = [];
    expect(matchClause('hello wor', params, 'x')).toBe(`x.search_vector @@ ${tsquerySql('hello wor', [])}`);
    expect(params).toEqual(['hello wor', 'wor']);
  });

  it.each([
    ['"to be or not to be"', ['to be', 'be or', 'or not', 'not to']],
    ['"In The" dusk', ['in the']],
    ['"whether to be"', ['to be']],
    ['"the the" "the the"', ['the the']],
    ['"red apple"', []], // no common pair
    ['in the', []], // not a phrase
    ['-"in the" dusk', []], // an excluded phrase is not required
    ['"in the" or dusk', []], // `or` may make the phrase optional
    ['"in-the"', []], // not plain words: the parser splits it otherwise
    ["\"don't be\"", []],
  ])('requires the common grams of %s: %j', (q, grams) => {
    expect(parseSearch(q).grams).toEqual(grams);
  });

  it('puts common grams in front of the phrase check, as one bound tsquery', () => {
    const params: unknown[] = [];
    const sql = matchClause('"of the" dusk', params);
    expect(sql).toMatch(/^i\.search_grams @@ \$3::tsquery AND i\.search_vector @@ /);
    expect(params).toEqual(['"of the" dusk', 'dusk', `'of the'`]);
  });

  it('uses the common words that migration 1732300000700 indexed', () => {
    expect(new Set(COMMON_WORDS_0700.split(' '))).toEqual(COMMON_WORDS);
  });
});
