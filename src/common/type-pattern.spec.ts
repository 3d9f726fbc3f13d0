import fc from 'fast-check';
import { bestMatch, bestMatchOfName, isDottedName, isPattern, matchesPattern, patternToSql, specificity } from './type-pattern';

describe('type patterns', () => {
  describe('matchesPattern', () => {
    it('"*" matches every name', () => {
      for (const name of ['core', 'core.note', 'acme.recipe.step']) expect(matchesPattern('*', name)).toBe(true);
    });

    it('an exact pattern matches only that name', () => {
      expect(matchesPattern('core.note', 'core.note')).toBe(true);
      expect(matchesPattern('core.note', 'core.notes')).toBe(false);
      expect(matchesPattern('core.note', 'core.note.sub')).toBe(false);
      expect(matchesPattern('core.note', 'core')).toBe(false);
    });

    it('"a.b.*" matches a.b itself and every name below it, nothing else', () => {
      expect(matchesPattern('core.*', 'core')).toBe(true);
      expect(matchesPattern('core.*', 'core.note')).toBe(true);
      expect(matchesPattern('core.*', 'core.note.deep')).toBe(true);
      expect(matchesPattern('core.*', 'corex.note')).toBe(false);
      expect(matchesPattern('core.*', 'acme.core')).toBe(false);
      expect(matchesPattern('core.note.*', 'core.note')).toBe(true);
      expect(matchesPattern('core.note.*', 'core')).toBe(false);
    });
  });

  describe('isPattern / isDottedName', () => {
    it.each(['*', 'core', 'core.note', 'core.*', 'acme-co.recipe_v2.*', 'a1.b2'])('accepts %s', (p) => {
      expect(isPattern(p)).toBe(true);
    });

    it.each(['', 'Bad Pattern!', 'Core.note', '*.note', 'core.*.x', 'core.', '.core', 'core..note', 'core.**', '**', 'core*', '_core', 'a'.repeat(201)])(
      'rejects %p',
      (p) => {
        expect(isPattern(p)).toBe(false);
      },
    );

    it('dotted names are patterns without wildcards', () => {
      expect(isDottedName('core.note')).toBe(true);
      expect(isDottedName('core.*')).toBe(false);
      expect(isDottedName('*')).toBe(false);
      expect(isDottedName('x'.repeat(201))).toBe(false);
    });
  });

  describe('specificity and bestMatch', () => {
    it('orders "*" < "a.*" < "a.b.*" < "a.b" < "a.b.c.*" < "a.b.c"', () => {
      const ordered = ['*', 'a.*', 'a.b.*', 'a.b', 'a.b.c.*', 'a.b.c'];
      for (let i = 1; i < ordered.length; i++) expect(specificity(ordered[i])).toBeGreaterThan(specificity(ordered[i - 1]));
    });

    it('an exact name beats the wildcard rooted at that same name', () => {
      expect(bestMatch(['core.note.*', 'core.note'], 'core.note')).toBe('core.note');
      expect(bestMatch(['core.note', 'core.note.*'], 'core.note')).toBe('core.note');
    });

    it('picks the most specific matching pattern regardless of order', () => {
      const patterns = ['*', 'core.*', 'core.note'];
      expect(bestMatch(patterns, 'core.note')).toBe('core.note');
      expect(bestMatch([...patterns].reverse(), 'core.note')).toBe('core.note');
      expect(bestMatch(patterns, 'core.bookmark')).toBe('core.*');
      expect(bestMatch(patterns, 'acme.recipe')).toBe('*');
      expect(bestMatch(['core.*', 'core.note.*'], 'core.note.x')).toBe('core.note.*');
    });

    it('prefers a match on the type\'s own name to one through an ancestor, then the nearer ancestor, whatever the names\' spelling or order', () => {
      const recipe = { name: 'acme.recipe', ancestors: ['core.note'] };
      const quick = { name: 'zeta.quick', ancestors: ['core.note'] };
      for (const order of [(x: string[]) => x, (x: string[]) => [...x].reverse()]) {
        expect(bestMatch(order(['acme.*', 'core.*']), recipe)).toBe('acme.*');
        expect(bestMatch(order(['zeta.*', 'core.*']), quick)).toBe('zeta.*');
        expect(bestMatch(order(['zeta.*', 'core.note.*']), quick)).toBe('zeta.*');
        expect(bestMatch(order(['*', 'core.*']), quick)).toBe('core.*');
        const deep = { name: 'x.leaf', ancestors: ['y.mid', 'core.note'] };
        expect(bestMatch(order(['core.note.*', 'y.*']), deep)).toBe('y.*');
        expect(bestMatch(order(['core.*', 'core.note.*']), deep)).toBe('core.note.*');
      }
    });

    it('returns undefined when nothing matches', () => {
      expect(bestMatch(['core.*', 'acme.recipe'], 'other.thing')).toBeUndefined();
      expect(bestMatch([], 'core.note')).toBeUndefined();
    });
  });

  it('patternToSql gives the exact name and the prefix for wildcards', () => {
    expect(patternToSql('*')).toEqual({ all: true });
    expect(patternToSql('core.note')).toEqual({ exact: 'core.note' });
    expect(patternToSql('core.*')).toEqual({ exact: 'core', prefix: 'core.' });
  });
});

describe('patterns over a type lineage (SPEC 5.4: parent.* covers subtypes)', () => {
  const recipe = { name: 'acme.recipe', ancestors: ['core.note'] };
  const deep = { name: 'acme.quick', ancestors: ['acme.recipe', 'core.note'] };

  it('`parent.*` covers subtypes whatever their names', () => {
    expect(matchesPattern('core.note.*', recipe)).toBe(true);
    expect(matchesPattern('core.note.*', deep)).toBe(true);
    expect(matchesPattern('core.*', deep)).toBe(true);
    expect(matchesPattern('acme.recipe.*', deep)).toBe(true);
  });

  it('an exact name still matches only that type', () => {
    expect(matchesPattern('core.note', recipe)).toBe(false);
    expect(matchesPattern('acme.recipe', recipe)).toBe(true);
    expect(matchesPattern('core.bookmark.*', recipe)).toBe(false);
  });

  it('the most specific pattern decides over a lineage too', () => {
    expect(bestMatch(['*', 'core.note.*', 'acme.recipe'], recipe)).toBe('acme.recipe');
    expect(bestMatch(['*', 'core.note.*'], deep)).toBe('core.note.*');
  });

  describe('bestMatchOfName', () => {
    it('picks what bestMatch picks for a name without ancestors, for any set of patterns', () => {
      const segment = fc.constantFrom('a', 'b', 'c');
      const name = fc.array(segment, { minLength: 1, maxLength: 4 }).map((s) => s.join('.'));
      const pattern = fc.oneof(name, name.map((n) => `${n}.*`), fc.constant('*'));
      fc.assert(
        fc.property(fc.uniqueArray(pattern, { maxLength: 12 }), name, (patterns, n) => {
          const set = new Set(patterns);
          expect(bestMatchOfName((p) => set.has(p), n)).toBe(bestMatch(patterns, n));
        }),
        { numRuns: 2000, seed: 7 },
      );
    });
  });
});
