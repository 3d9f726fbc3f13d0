import { ApiError } from './api-error';
import { decodeCursor, decodeInstantCursor, decodeValueCursor, encodeCursor, encodeInstantCursor, encodeValueCursor, pageQueryOf } from './pagination';

const position = { createdAt: '2026-11-27T12:00:00.123Z', id: '5fa6676c-1ef9-4825-aeae-61c53329a303' };
const raw = (parts: unknown) => Buffer.from(JSON.stringify(parts)).toString('base64url');
const refused = (cursor: string, list: Parameters<typeof decodeCursor>[1] = 'items') => {
  let thrown: unknown;
  try {
    decodeCursor(cursor, list);
  } catch (err) {
    thrown = err;
  }
  expect(thrown).toBeInstanceOf(ApiError);
  expect((thrown as ApiError).code).toBe('validation_error');
};

describe('cursors', () => {
  it('name the position in the list that issued them', () => {
    expect(decodeCursor(encodeCursor(position, 'items'), 'items')).toEqual(position);
    refused(encodeCursor(position, 'items'), 'keys');
  });

  it('issued before they named their list, still page any list', () => {
    expect(decodeCursor(raw([position.createdAt, position.id]), 'keys')).toEqual(position);
  });

  it('pass only as encodeCursor writes them, byte for byte', () => {
    refused(raw([position.createdAt, position.id, 'items', 'extra']));
    refused(`${encodeCursor(position, 'items')}=`);
    refused(raw([position.createdAt, position.id, 7]));
  });
});

describe('a page query read by its route (pageQueryOf)', () => {
  const fieldsOf = async (query: Record<string, unknown>) => {
    const err = await pageQueryOf(query).then(() => undefined, (e: unknown) => e);
    expect(err).toBeInstanceOf(ApiError);
    expect((err as ApiError).code).toBe('validation_error');
    return ((err as ApiError).details!.fields as Array<{ field: string }>).map((f) => f.field);
  };

  it('takes limit and cursor as PageQuery does, leaving the route\'s other parameters alone', async () => {
    expect(await pageQueryOf({ limit: '20', cursor: 'abc', done: 'revoked', utm_source: 'mail' })).toEqual({ limit: 20, cursor: 'abc' });
    expect(await pageQueryOf({})).toEqual({});
  });

  it('refuses a limit out of 1 to 100, or not a decimal integer, and either given twice, naming it', async () => {
    for (const limit of ['0', '101', '-1', '1.5', 'ten', '']) expect(await fieldsOf({ limit })).toEqual(['limit']);
    expect(await fieldsOf({ limit: ['1', '2'] })).toEqual(['limit']);
    expect(await fieldsOf({ cursor: ['a', 'b'] })).toEqual(['cursor']);
  });
});

describe('instant cursors', () => {
  const at = { at: '2026-11-27T12:00:00.123456Z', id: position.id };
  const refusedInstant = (cursor: string, list: Parameters<typeof decodeInstantCursor>[1] = 'items?sort=updated_at') => {
    expect(() => decodeInstantCursor(cursor, list)).toThrow(ApiError);
  };

  it('carry microseconds, in the list that issued them', () => {
    expect(decodeInstantCursor(encodeInstantCursor(at, 'items?sort=updated_at'), 'items?sort=updated_at')).toEqual(at);
    expect(decodeInstantCursor(encodeInstantCursor({ ...at, at: '0001-01-01T00:00:00.000000Z' }, 'items?sort=timestamp'), 'items?sort=timestamp')).toEqual({
      ...at,
      at: '0001-01-01T00:00:00.000000Z',
    });
    refusedInstant(encodeInstantCursor(at, 'items?sort=updated_at'), 'items?sort=-updated_at');
  });

  it('refuse what PostgreSQL would not read as an instant, and cursors of another kind', () => {
    for (const bad of ['2026-11-27T12:00:00.123Z', '2026-02-30T12:00:00.123456Z', '0000-01-01T00:00:00.000000Z', '2026-11-27T24:00:00.000000Z', '2026-11-27 12:00:00.123456Z']) {
      refusedInstant(encodeInstantCursor({ ...at, at: bad }, 'items?sort=updated_at'));
    }
    refusedInstant(encodeInstantCursor({ ...at, id: 'x' }, 'items?sort=updated_at'));
    refusedInstant(raw([at.at, at.id]));
    refusedInstant(encodeCursor(position, 'items'), 'items');
  });
});

describe('value cursors', () => {
  const list = 'items?sort=properties.a' as const;
  const anyValue = () => true;

  it('carry the value as given and the id, in the list that issued them, when the list takes the value', () => {
    const p = { value: '{"b": [1, "c"]}', id: position.id };
    expect(decodeValueCursor(encodeValueCursor(p, list), list, anyValue)).toEqual(p);
    expect(decodeValueCursor(undefined, list, anyValue)).toBeUndefined();
    expect(() => decodeValueCursor(encodeValueCursor(p, list), list, (v) => v !== p.value)).toThrow(ApiError);
    expect(() => decodeValueCursor(encodeValueCursor(p, list), 'items?sort=-properties.a', anyValue)).toThrow(ApiError);
  });

  it('refuse a forged id, a missing or extra part, and cursors of another kind', () => {
    expect(() => decodeValueCursor(encodeValueCursor({ value: '1', id: 'x' }, list), list, anyValue)).toThrow(ApiError);
    expect(() => decodeValueCursor(raw(['1', position.id]), list, anyValue)).toThrow(ApiError);
    expect(() => decodeValueCursor(raw(['1', position.id, list, '']), list, anyValue)).toThrow(ApiError);
    expect(() => decodeValueCursor(encodeCursor(position, 'items'), list, anyValue)).toThrow(ApiError);
  });
});
