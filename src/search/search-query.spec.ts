import { COMMON_WORDS_0700 } from '../database/migrations/1732300000700-search-common-grams';
import { FREQUENT_WORDS_0900 } from '../database/migrations/1732300000900-search-frequent-word-grams';
import { COMMON_WORDS } from './common-words';
import { matchClause, parseSearch, queryWordCount, tsquerySql } from './search-query';

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

  it('reads <, >, @, /, : and . as spaces, a word they split as a phrase (as the stored text is parsed)', () => {
    // `<` is an operator character to websearch_to_tsquery, which splits words there.
    expect(parseSearch('List<pademelon>')).toMatchObject({ text: 'List "pademelon"', positive: ['List', 'pademelon'], phrase: true });
    expect(parseSearch('List>pademelon')).toMatchObject({ text: '"List pademelon"', positive: ['List', 'pademelon'], phrase: true });
    expect(parseSearch('see www.bilby.org/marsupials')).toMatchObject({ text: 'see "www bilby org marsupials"', prefix: undefined });
    expect(parseSearch('numbat@tassie.example -spam.example')).toMatchObject({
      text: '"numbat tassie example" -"spam example"',
      excluded: '"spam example"',
      positive: ['numbat', 'tassie', 'example'],
    });
    expect(parseSearch('"a.b c" or d')).toMatchObject({ text: '"a b c" or d', prefix: 'd' });
    expect(parseSearch('plain words').text).toBe('plain words');
  });

  it('counts every word, phrases\' and excluded ones too, and keeps all wanted words for snippets', () => {
    expect(queryWordCount('a "b c" -d -"e f" or g www.h.i')).toBe(10);
    expect(queryWordCount('- !! () ""')).toBe(0);
    // Punctuation PostgreSQL's parser splits at makes a word of each part (a phrase of them).
    expect(queryWordCount('w,w;w_w+w\'w=w#w%w-w')).toBe(10);
    expect(queryWordCount('cafe\u0301 naïve')).toBe(2);
    const many = Array.from({ length: 12 }, (_, i) => `w${i}`).join(' ');
    expect(parseSearch(many)).toMatchObject({ positive: many.split(' ').slice(0, 8), wanted: many.split(' ') });
    expect(parseSearch('a -b "c d"').wanted).toEqual(['a', 'c', 'd']);
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
    expect(sql).toContain('$4');
    // The query as websearch_to_tsquery reads it (`(` and `)` are no part of any word), its last
    // word as a placeholder, the placeholder, and the word it stands for.
    expect(params).toEqual(['tenant', "x' ; DROP TABLE items; x0", 'x0', 'hel']);
  });

  it('rewrites the last word to a prefix only when there is one', () => {
    expect(tsquerySql('"a b"', [])).toBe(`(SELECT websearch_to_tsquery('simple', $1))`);
    expect(tsquerySql('a b', [])).toContain('ts_rewrite(');
  });

  it.each([
    ['"foo bar" bar', 'bar', '"foo bar" x0'],
    ['x0 X1 x2 hel', 'hel', 'x0 X1 x2 x3'],
    ['"x0 x1" orange', 'orange', '"x0 x1" x2'],
    ['a or orange', 'orange', 'a or x0'],
  ])('rewrites only the last word of %j, through a placeholder found nowhere else in it', (q, prefix, text) => {
    const parsed = parseSearch(q);
    expect(parsed.prefix).toBe(prefix);
    const params: unknown[] = [];
    tsquerySql(parsed, params);
    expect(params).toEqual([text, text.split(' ').at(-1), prefix]);
  });

  it('matchClause searches the tenant-scoped index, and tests the item\'s own vector where the index query is wider', () => {
    const params: unknown[] = [];
    const tsquery = tsquerySql('hello wor', []);
    expect(matchClause('hello wor', 'tenant-1', params, { alias: 'x' })).toBe(
      `item_search_scoped(x.tenant_id, x.search_vector) @@ (SELECT item_search_scoped_query($4::uuid, ${tsquery})) ` +
        `AND ((SELECT ${tsquery}::text !~ '<(-|[0-9]+)>') OR x.search_vector @@ ${tsquery})`,
    );
    expect(params).toEqual(['hello x0', 'x0', 'wor', 'tenant-1']);
  });

  it.each([
    ['cat dog', 'cat dog'],
    ['"red apple" pie', '"red apple" pie'],
    ['cat -dog', 'cat'],
    ['-"red apple" pie tar', 'pie tar'],
    ['"red apple" -pie', '"red apple"'],
    ['cat or -dog', undefined], // with `or`, an exclusion may be what matches: no index
    ['-cat -dog', undefined], // nothing required: no index
  ])('searches the index for %s with %j', (q, indexText) => {
    expect(parseSearch(q).indexText).toEqual(indexText);
  });

  it('for a caller who may not read tags, always tests the item\'s text without them, exclusions included', () => {
    const withoutTags = `to_tsvector('simple', translate(i.search_document, '<>@/:.', '      ')) @@`;
    for (const q of ['hello wor', 'pie -secret', '-secret', '"of the" dusk']) {
      const sql = matchClause(q, 't', [], { tags: false });
      expect(sql).toContain(withoutTags);
      expect(sql).not.toMatch(/ i\.search_vector @@|^i\.search_vector @@/);
    }
  });

  describe('negation, exactly where websearch_to_tsquery negates', () => {
    // Each with websearch_to_tsquery('simple', q) of PostgreSQL 15: `-` negates wherever a term
    // may begin (after white space, ! & | ( ) <, a closing quote or another term's end), not
    // inside a word. The query text it is given is written back so that it reads the same.
    it.each([
      ['a(-b', 'a -b'], // 'a' & !'b'
      ['a!-b', 'a -b'],
      ['a&-b', 'a -b'],
      ['a|-b', 'a -b'],
      ['a<-b', 'a -b'],
      ['a)-b', 'a -b'],
      ['a"x"-b', 'a "x" -b'], // 'a' & 'x' & !'b'
      ['a - b', 'a -b'],
      ['a -!b', 'a -b'],
      ['wombat(-secrettagalpha)', 'wombat -secrettagalpha'],
      ['wombat!-secrettagalpha', 'wombat -secrettagalpha'],
    ])('%s excludes b: %j, the index searched for the rest', (q, text) => {
      const parsed = parseSearch(q);
      expect(parsed.text).toBe(text);
      expect(parsed.excluded).toBe(q.startsWith('wombat') ? '"secrettagalpha"' : '"b"');
      expect(parsed.indexText).toBe(text.replace(/ -\S+$/, ''));
      expect(parsed.prefix).toBeUndefined();
    });

    it.each([
      ['a(-"x y"', 'a -"x y"'], // 'a' & !( 'x' <-> 'y' )
      ['a!-"x y"', 'a -"x y"'],
      ['a&-"x y"', 'a -"x y"'],
      ['zebrafish(-"digs burrows")', 'zebrafish -"digs burrows"'],
    ])('%s excludes the phrase: %j, which the index query leaves out', (q, text) => {
      const parsed = parseSearch(q);
      expect(parsed).toMatchObject({ text, phrase: false, indexText: text.replace(/ -".*$/, '') });
      expect(parsed.excluded).toMatch(/^"(x y|digs burrows)"$/);
    });

    it.each([
      ['a-b', 'a-b'], // 'a-b' <-> 'a' <-> 'b': a hyphenated word
      ['a,-b', 'a,-b'], // 'a' <-> 'b'
      ['a.-b', '"a -b"'], // 'a' <-> 'b' (`.` then splits it, as the stored text is)
      ['a_-b', 'a_-b'],
      ['a>-b', '"a -b"'],
      ['a--b', 'a--b'],
      ['a:-b', 'a "-b"'], // 'a' & 'b': `:` ends a word and begins the next
      ['a,-"x y"', 'a,- "x y"'], // 'a' & 'x' <-> 'y'
      ['a.-"x y"', '"a -" "x y"'],
      ['a "-b"', 'a "-b"'], // inside quotes `-` is no operator
      ['a --b', 'a b'], // 'a' & !!'b', that is b
      ['a -(-b)', 'a b'],
      ['a -', 'a'], // nothing to negate
    ])('%s excludes nothing: %j, searched in the index as it is', (q, text) => {
      const parsed = parseSearch(q);
      expect(parsed).toMatchObject({ text, excluded: '', indexText: text });
    });

    it('reads `or` where websearch_to_tsquery does, and never searches the index with an exclusion under it', () => {
      expect(parseSearch('a(-b or c')).toMatchObject({ text: 'a -b or c', indexText: undefined });
      expect(parseSearch('a or(-b')).toMatchObject({ text: 'a or -b', indexText: undefined });
      expect(parseSearch('a"x"or b')).toMatchObject({ text: 'a "x" or b', indexText: 'a "x" or b' });
      // `or` without an operand after it: a word at the end, nothing before `(`.
      expect(parseSearch('a or')).toMatchObject({ text: 'a "or"', positive: ['a', 'or'] });
      expect(parseSearch('a or (')).toMatchObject({ text: 'a', indexText: 'a' });
      expect(parseSearch('a or-b')).toMatchObject({ text: 'a or-b', excluded: '' });
      expect(parseSearch('a - or b')).toMatchObject({ text: 'a -"or" b', excluded: '"or"', indexText: 'a b' });
    });

    it('for a caller who may not read tags, keeps the exclusion out of the index query, and fails closed should one reach it', () => {
      const params: unknown[] = [];
      const sql = matchClause('wombat(-secrettagalpha)', 't', params, { tags: false });
      expect(params).toEqual(['wombat -secrettagalpha', 'wombat', 't']);
      expect(sql).toContain(`item_search_scoped_query($3::uuid, (SELECT websearch_to_tsquery('simple', $2)))`);
      expect(sql).toContain(`THEN NULL ELSE item_search_scoped_query(`);
      expect(matchClause('wombat(-secrettagalpha)', 't', [], { tags: true })).not.toContain('THEN NULL');
    });
  });

  it('skips the index when a query only excludes', () => {
    const params: unknown[] = [];
    expect(matchClause('-cat', 'tenant-1', params)).toBe(`i.search_vector @@ (SELECT websearch_to_tsquery('simple', $1))`);
  });

  it('searches the index with the required part only when the query excludes something', () => {
    const params: unknown[] = [];
    const sql = matchClause('pie -"red apple"', 't', params);
    expect(sql).toContain(`item_search_scoped_query($3::uuid, (SELECT websearch_to_tsquery('simple', $2)))`);
    expect(sql).toMatch(/AND i\.search_vector @@ \(SELECT websearch_to_tsquery\('simple', \$1\)\)$/);
    expect(params).toEqual(['pie -"red apple"', 'pie', 't']);
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

  it('searches the scoped grams index instead of the vector one when a phrase has common grams', () => {
    const params: unknown[] = [];
    const sql = matchClause('"of the" dusk', 't', params);
    expect(sql).toMatch(/^item_search_scoped\(i\.tenant_id, i\.search_grams\) @@ \(SELECT item_search_scoped_query\(\$5::uuid, \$4::tsquery\)\) AND /);
    expect(sql).not.toContain('i.search_vector) @@');
    expect(params).toEqual(['"of the" x0', 'x0', 'dusk', `'of the'`, 't']);
  });

  it('uses the common words that migrations 1732300000700 and 1732300000900 indexed', () => {
    expect(new Set(`${COMMON_WORDS_0700} ${FREQUENT_WORDS_0900}`.split(' '))).toEqual(COMMON_WORDS);
  });
});
