import { REGEX_COST, regexCost, RegexEngine } from './regex-engine';

const thrown = (fn: () => unknown): unknown => {
  try {
    fn();
  } catch (err) {
    return err;
  }
  return undefined;
};

describe('regexCost', () => {
  const { literal, wide, unicodeProperty } = REGEX_COST;

  it.each<[string, number]>([
    ['^[A-Z]{3}$', 1 + literal * 3 + 1],
    ['abc', 3],
    ['a{1000}', 1000],
    ['a{2,50}', 50],
    ['a{5,}', 6],
    ['a*b+c?', 3],
    ['.{10}', wide * 10],
    ['[^a]{2}', (literal + wide) * 2],
    ['\\W\\d', wide + literal],
    ['\\p{L}', unicodeProperty],
    ['\\p{L}{50}', unicodeProperty * 50],
    ['[\\p{L}\\s-]+', literal + unicodeProperty],
    ['[a-zé]{10}', (literal + wide) * 10],
    ['[\\u0080-\\uffff]', literal + wide],
    ['[à-ÿĀ-ſ]{2}', (literal + wide * 2) * 2],
    ['[a-zé\\u0100-\\u017f]', literal + wide * 2],
    ['[\\x{100}-\\x{17f}\\x41-\\x5a]', literal + wide],
    ['[\\W\\d]', literal + wide],
    [`[${Array.from({ length: 150 }, (_, i) => `${String.fromCodePoint(0x100 + i * 0x150)}-${String.fromCodePoint(0x1ff + i * 0x150)}`).join('')}]{50}`, (literal + wide * 150) * 50],
    ['(ab|cd){3}', 12],
    ['((a{10}){10}){10}', 1000],
    ['(?:x)(?<name>y)(?=z)', 3],
    ['a{', 2],
    ['a)b', 3],
  ])('%s weighs %d', (source, cost) => {
    expect(regexCost(source)).toBe(cost);
  });
});

describe('RegexEngine', () => {
  it('compiles a (pattern, flags) once, and refuses a pattern RE2 cannot run once', () => {
    const engine = new RegexEngine();
    const re = engine.regExp('^[A-Z]{3}$', 'u');
    expect(engine.regExp('^[A-Z]{3}$', 'u')).toBe(re);
    expect([re.test('ABC'), re.test('abc')]).toEqual([true, false]);
    const refusal = thrown(() => engine.regExp('(?<=a)b', 'u'));
    expect(refusal).toBeInstanceOf(SyntaxError);
    expect(thrown(() => engine.regExp('(?<=a)b', 'u'))).toBe(refusal);
    expect(engine.spent).toBe(false);
  });

  it('is spent once it has taken in its budget of patterns', () => {
    const engine = new RegexEngine();
    let compiled = 0;
    while (!engine.spent && compiled < 200) engine.regExp(`x${compiled++}a{999}`, 'u');
    expect(engine.spent).toBe(true);
    expect(compiled).toBeGreaterThan(50);
    expect(engine.broken).toBe(false);
  });

  it('an engine whose heap ran out says so, and leaves every other engine working', () => {
    const full = new RegexEngine();
    const other = new RegexEngine();
    const code = other.regExp('^[A-Z]{3}$', 'u');
    // Each \p{L} takes some 135 KB of the 16 MiB heap; the one that does not fit aborts.
    for (let i = 0; i < 500 && !full.broken; i++) thrown(() => full.regExp(`x${i}\\p{L}`, 'u'));
    expect(full.broken).toBe(true);
    expect(full.spent).toBe(true);
    expect([code.test('ABC'), code.test('abc')]).toEqual([true, false]);
    expect(new RegexEngine().regExp('^[a-z]+$', 'u').test('abc')).toBe(true);
  });
});
