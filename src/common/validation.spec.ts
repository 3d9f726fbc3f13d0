import { plainToInstance, Transform, Type } from 'class-transformer';
import { IsArray, IsObject, IsString, ValidateNested, validateSync } from 'class-validator';
import { IsQueryInt, IsRfc3339, isRfc3339, plainToDto } from './validation';

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
