import { plainToInstance, Transform, Type } from 'class-transformer';
import type { TransformOperationExecutor as Executor } from 'class-transformer/types/TransformOperationExecutor';
import { ArrayMaxSize, ArrayNotEmpty, IsArray, IsDefined, IsIn, IsInt, IsObject, IsOptional, IsString, Max, Min, ValidateNested, validateSync } from 'class-validator';
import { BulkActionDto } from '../bulk/bulk.dto';
import { BulkItemsDto } from '../items/items.dto';
import { CharLength, codePointLength, IsCommaList, hasCharLength, hasHiddenCharacter, isBlank, IsQueryInt, isReadableName, IsRfc3339, isRfc3339, MaxChars, plainToDto, validationIssues } from './validation';

describe('isRfc3339', () => {
  it.each(['2026-01-02T03:04:05Z', '2026-01-02t03:04:05z', '2026-01-02T03:04:05.123456+02:00', '2024-02-29T23:59:59-11:30'])('accepts %s', (v) => {
    expect(isRfc3339(v)).toBe(true);
  });

  it.each([
    '2026-01-02T03:04:05', // no zone
    '2026-01-02',
    '2026-01-02 03:04:05Z',
    '2026-02-30T00:00:00Z',
    '2025-02-29T00:00:00Z',
    '2026-13-01T00:00:00Z',
    '2026-01-01T24:00:00Z',
    '2026-01-01T00:00:00+24:00',
    '0000-01-01T00:00:00Z',
    '2020-06-15T12:00:00-23:59', // past ±15:59
    '0001-01-01T00:00:00+14:00', // year 0 in UTC
    '9999-12-31T23:59:59-14:00', // year 10000 in UTC
    '2016-12-31T23:59:60Z', // leap second
    '+02026-01-01T00:00:00Z',
    ' 2026-01-02T03:04:05Z',
    1767323045,
  ])('refuses %p', (v) => {
    expect(isRfc3339(v)).toBe(false);
  });
});

describe('IsRfc3339', () => {
  class T {
    @IsRfc3339()
    at: unknown;
  }
  const check = (at: unknown) => {
    const t = plainToInstance(T, { at });
    return validateSync(t).length ? 'refused' : t.at;
  };

  it.each([
    ['2026-01-02T03:04:05Z', '2026-01-02T03:04:05.000Z'],
    ['2026-01-02t03:04:05.5+02:00', '2026-01-02T01:04:05.500Z'],
    ['2020-01-01T00:00:00.1239999Z', '2020-01-01T00:00:00.123Z'], // cut, not rounded to .124
    ['9999-12-31T23:59:59.9999999Z', '9999-12-31T23:59:59.999Z'], // not rounded into year 10000
    ['0001-01-01T00:00:00.0009999Z', '0001-01-01T00:00:00.000Z'],
    ['2016-12-31T23:59:59.999999999-15:59', '2017-01-01T15:58:59.999Z'],
  ])('keeps %s as the instant %s, cut to the millisecond', (sent, kept) => {
    expect(check(sent)).toBe(kept);
  });

  it('takes the years 1 to 9999 to apply to the instant once cut and taken to UTC', () => {
    expect(check('9999-12-31T23:59:59.9999999+00:00')).toBe('9999-12-31T23:59:59.999Z');
    expect(check('9999-12-31T23:59:59.9999999-00:01')).toBe('refused'); // year 10000
    expect(check('0001-01-01T00:00:00.9999999+00:01')).toBe('refused'); // year 0
    expect(check('2026-01-02T03:04:05')).toBe('refused');
  });
});

describe('IsQueryInt', () => {
  class Q {
    @IsQueryInt(0, 100)
    n: unknown;
  }
  const check = (n: string) => {
    const q = plainToInstance(Q, { n });
    return validateSync(q).length ? 'refused' : q.n;
  };

  it('turns plain decimal digits into a number', () => {
    expect(check('0')).toBe(0);
    expect(check('42')).toBe(42);
    expect(check('007')).toBe(7);
  });

  it.each(['0x10', ' 5', '5 ', '1e3', '+5', '-5', '5.0', '', '٣', '101', '9'.repeat(30)])('refuses %p', (n) => {
    expect(check(n)).toBe('refused');
  });
});

describe('text people read', () => {
  // Each shows nothing: a consent page named an app of U+200B "Allow <strong></strong> to:".
  const invisible = ['', '   ', '\u3000\t', '\u200b', '\u3164', '\uffa0', '\u2800', '\u00ad\u034f', '\u2060', '\u115f\u1160', '\u{E0041}\u{E0042}\u{E007F}', '\ufe0f', '\u200d \u200c'];

  it.each(invisible)('counts %j as blank, and so as no name', (text) => {
    expect(isBlank(text)).toBe(true);
    expect(isReadableName(text)).toBe(false);
  });

  it.each(['Ada', ' Ada ', '❤️', '👨‍👩‍👧', '\u200bA', '\u3164\u3164a', '\u0301'])('takes %j, which shows something, as a name', (text) => {
    expect(isBlank(text)).toBe(false);
    expect(isReadableName(text)).toBe(true);
  });

  it('refuses control characters and bidirectional overrides and isolates in a name, as before', () => {
    for (const text of ['Ada\u0007', 'Ada\n', 'Ada\u0085', 'A\u2028B', 'A\u2029B', '\u202eecilA', 'A\u2066B\u2069']) expect(isReadableName(text)).toBe(false);
  });

  it('finds the characters an email must not hide: controls, format characters and invisible ones', () => {
    for (const text of ['a\u202eb@example.com', 'a\u200fb@example.com', 'a\u200b@example.com', 'a@exa\u2060mple.com', 'a\u3164b@example.com', 'a\u3000b@example.com', 'a\u00adb@example.com', 'a\u0007@example.com']) {
      expect([text, hasHiddenCharacter(text)]).toEqual([text, true]);
    }
    for (const text of ['ada@example.com', 'zoë@exämple.com', 'δοκιμή@παράδειγμα.δοκιμή']) expect(hasHiddenCharacter(text)).toBe(false);
  });
});

describe('lengths in characters', () => {
  it('counts code points: an emoji is one, ❤️ (with its variation selector) two', () => {
    expect(codePointLength('abc')).toBe(3);
    expect(codePointLength('😀😀')).toBe(2);
    expect(codePointLength('a\ufe0f'.repeat(200))).toBe(400);
    expect(codePointLength('❤️')).toBe(2);
    expect(hasCharLength('😀'.repeat(200), 0, 200)).toBe(true);
    expect(hasCharLength('a\ufe0f'.repeat(200), 0, 200)).toBe(false);
    expect(hasCharLength('a'.repeat(401), 0, 200)).toBe(false);
    expect(hasCharLength('😀', 2, 5)).toBe(false);
    expect(hasCharLength('ab', 2, 5)).toBe(true);
  });

  class Texts {
    @MaxChars(3)
    short: unknown;

    @CharLength(2, 3)
    ranged: unknown;

    @MaxChars(2, { each: true })
    list: unknown;
  }
  const problems = (o: object) => validationIssues(validateSync(plainToInstance(Texts, { short: 'a', ranged: 'ab', list: [], ...o })));

  it('holds text fields to their limit in code points, where class-validator\'s MaxLength let a variation selector through uncounted', () => {
    expect(problems({ short: '😀😀😀', ranged: '😀😀', list: ['😀😀'] })).toEqual([]);
    expect(problems({ short: 'a\ufe0fa\ufe0f' })).toEqual([{ field: 'short', message: 'must be shorter than or equal to 3 characters' }]);
    expect(problems({ ranged: '\ufe0f' })).toEqual([{ field: 'ranged', message: 'must be longer than or equal to 2 characters' }]);
    expect(problems({ ranged: 'abcd' })).toEqual([{ field: 'ranged', message: 'must be shorter than or equal to 3 characters' }]);
    expect(problems({ list: ['ok', 'a\ufe0fb'] })).toEqual([{ field: 'list', message: 'each value in list must be shorter than or equal to 2 characters' }]);
    expect(problems({ short: 5 })).toEqual([{ field: 'short', message: 'must be shorter than or equal to 3 characters' }]);
  });
});

describe('plainToDto', () => {
  class Inner {
    @IsString() name: string;
  }
  class Outer {
    @IsObject() properties: Record<string, unknown>;
    @ValidateNested() @Type(() => Inner) inner: Inner;
    @IsArray() @Transform(({ value }) => (Array.isArray(value) ? [...new Set(value)] : value)) tags: string[];
  }

  it('hands free-form objects and arrays over as sent, and builds what a decorator asks for', () => {
    const plain = { properties: { a: [1, { b: 2 }] }, inner: { name: 'n' }, tags: ['x', 'x', 'y'], extra: { zz: 1 } };
    const dto = plainToDto(Outer, plain);
    expect(dto).toBeInstanceOf(Outer);
    expect(dto.properties).toBe(plain.properties);
    expect((dto as unknown as { extra: unknown }).extra).toBe(plain.extra);
    expect(dto.inner).toBeInstanceOf(Inner);
    expect(dto.tags).toEqual(['x', 'y']);
    expect(validateSync(dto, { whitelist: true, forbidNonWhitelisted: true }).map((e) => e.property)).toEqual(['extra']);
  });

  it('gives what plainToInstance gives for what is not an object', () => {
    expect(plainToDto(Outer, null)).toBe(plainToInstance(Outer, null));
    expect(plainToDto(Outer, [{ tags: ['a'] }])).toEqual(plainToInstance(Outer, [{ tags: ['a'] }]));
  });
});

// The class plainToInstance runs, from the build it loads (its types are published apart).
// eslint-disable-next-line @typescript-eslint/no-require-imports
const { TransformOperationExecutor } = require('class-transformer/cjs/TransformOperationExecutor') as { TransformOperationExecutor: typeof Executor };

describe('plainToDto and an array past its ArrayMaxSize', () => {
  let built = 0;
  class Element {
    constructor() {
      built++;
    }
    @IsString() name: string;
  }
  class Listing {
    @IsArray() @ArrayMaxSize(3) @ValidateNested({ each: true }) @Type(() => Element) elements: Element[];
  }
  class Wrapper {
    @ValidateNested() @Type(() => Listing) listing: Listing;
  }
  const named = (n: number) => Array.from({ length: n }, (_, i) => ({ name: `e${i}` }));
  const issues = (dto: object) => validationIssues(validateSync(dto, { whitelist: true, forbidNonWhitelisted: true }));

  beforeEach(() => (built = 0));

  it('builds the elements of an array within the limit', () => {
    const dto = plainToDto(Listing, { elements: named(3) });
    expect(built).toBe(3);
    expect(dto.elements[0]).toBeInstanceOf(Element);
    expect(issues(dto)).toEqual([]);
  });

  it('builds nothing from a longer one, which validation refuses as sent', () => {
    const elements = named(4);
    const dto = plainToDto(Listing, { elements });
    expect(built).toBe(0);
    expect(dto.elements).toBe(elements);
    expect(issues(dto)).toContainEqual({ field: 'elements', message: 'must contain no more than 3 elements' });
  });

  it('holds inside a nested DTO', () => {
    expect(plainToDto(Wrapper, { listing: { elements: named(3) } }).listing.elements[2]).toBeInstanceOf(Element);
    built = 0;
    const dto = plainToDto(Wrapper, { listing: { elements: named(4) } });
    expect(built).toBe(0);
    expect(dto.listing).toBeInstanceOf(Listing);
    expect(issues(dto)).toContainEqual({ field: 'listing.elements', message: 'must contain no more than 3 elements' });
  });

  // class-transformer's visits of values: one per element it builds, a handful for the rest.
  const visits = (dto: new () => object, plain: object) => {
    const transform = jest.spyOn(TransformOperationExecutor.prototype, 'transform');
    try {
      plainToDto(dto, plain);
      return transform.mock.calls.length;
    } finally {
      transform.mockRestore();
    }
  };

  it('leaves POST /items/bulk\'s items alone past 1000 elements', () => {
    expect(visits(BulkItemsDto, { mode: 'upsert', items: Array.from({ length: 1000 }, () => ({})) })).toBeGreaterThan(1000);
    expect(visits(BulkItemsDto, { mode: 'upsert', items: Array.from({ length: 1001 }, () => ({})) })).toBeLessThan(10);
    expect(visits(BulkItemsDto, { mode: 'upsert', items: Array.from({ length: 50_000 }, () => 1) })).toBeLessThan(10);
  });

  it('leaves a tag list alone past 100 tags, in a bulk action and in its filter', () => {
    const tags = Array.from({ length: 5000 }, (_, i) => `t${i}`);
    expect(visits(BulkActionDto, { action: 'update_tags', add_tags: tags.slice(0, 100), filter: { tags: tags.slice(0, 100) } })).toBeGreaterThan(200);
    expect(visits(BulkActionDto, { action: 'update_tags', add_tags: tags, filter: { tags } })).toBeLessThan(10);
    const dto = plainToDto(BulkActionDto, { action: 'update_tags', add_tags: tags, filter: { tags } });
    expect(issues(dto).map((i) => i.field)).toEqual(['filter.tags', 'add_tags']);
  });
});

describe('class-transformer, as patches/ leaves it', () => {
  it('de-duplicates an object\'s keys without scanning the list for each key', () => {
    const plain = Object.fromEntries(Array.from({ length: 2000 }, (_, i) => [`k${i}`, i]));
    const indexOf = jest.spyOn(Array.prototype, 'indexOf');
    try {
      plainToInstance(Object, plain);
      expect(indexOf.mock.calls.length).toBeLessThan(100);
    } finally {
      indexOf.mockRestore();
    }
  });
});

describe('validationIssues: a missing field', () => {
  class Body {
    @IsString() @CharLength(1, 200) type: string;
    @IsIn(['a', 'b']) mode: string;
    @IsDefined({ message: 'is required: the version the change is based on' }) version: number;
    @IsOptional() @IsString() label?: string;
  }
  const problems = (o: object) => validationIssues(validateSync(plainToInstance(Body, o)));

  it('is said to be required, whatever the checks on it, not refused by each of its format rules', () => {
    expect(problems({})).toEqual([
      { field: 'type', message: 'is required' },
      { field: 'mode', message: 'is required' },
      { field: 'version', message: 'is required: the version the change is based on' },
    ]);
  });

  it('says only that a value of the wrong kind is of the wrong kind, not that it breaks the range checks too', () => {
    class Versioned {
      @IsInt() @Min(1) @Max(2147483647) version: number;
    }
    expect(validationIssues(validateSync(plainToInstance(Versioned, { version: '1' })))).toEqual([{ field: 'version', message: 'must be an integer number' }]);
    expect(validationIssues(validateSync(plainToInstance(Versioned, { version: 0 })))).toEqual([{ field: 'version', message: 'must not be less than 1' }]);
  });

  it('words class-validator\'s "should" defaults as every other refusal is worded', () => {
    class Listed {
      @ArrayNotEmpty() events: string[];
    }
    expect(validationIssues(validateSync(plainToInstance(Listed, { events: [] })))).toEqual([{ field: 'events', message: 'must not be empty' }]);
  });

  it('is not what a present, wrong value is', () => {
    expect(problems({ type: 5, mode: 'c', version: 1, label: null })).toEqual([
      { field: 'type', message: 'must be a string' },
      { field: 'mode', message: 'must be one of the following values: a, b' },
    ]);
  });
  it('nor what a null is: one message, not one per check; a field that takes null (IsOptional) takes it', () => {
    expect(problems({ type: null, mode: null, version: null, label: null })).toEqual([
      { field: 'type', message: 'must not be null' },
      { field: 'mode', message: 'must not be null' },
      { field: 'version', message: 'is required: the version the change is based on' },
    ]);
  });
});

describe('IsCommaList', () => {
  class Query {
    @IsOptional() @IsCommaList(10) tags?: unknown;
  }
  const problems = (tags: unknown) => validationIssues(validateSync(plainToInstance(Query, { tags })));
  const GAPPED = 'give tags as a comma-separated list without empty entries ("a,b", not "a,,b", "a," or "")';

  it.each(['a', 'a,b', ' a , b '])('takes %p', (tags) => expect(problems(tags)).toEqual([]));

  it.each([
    // A repeated parameter never gets here: the pipe refuses it as repeated.
    [['a', 'b'], 'must be a comma-separated list'],
    ['a,,b', GAPPED],
    ['a,', GAPPED],
    [',a', GAPPED],
    ['', GAPPED],
    ['a, ,b', GAPPED],
    ['a,b,c,d,e,f', 'must be at most 10 characters'],
    [{ a: 1 }, 'must be a comma-separated list'],
  ])('refuses %p: %s', (tags, message) => expect(problems(tags)).toEqual([{ field: 'tags', message }]));
});
