import { ApiError } from '../common/api-error';
import { encodeCursor } from '../common/pagination';
import {
  afterSql, cursorAfter, DEFAULT_SORT, isSort, listingOrder, listingOrderOf, longValuePosition, MAX_CURSOR_VALUE, orderBy, positionOf, SORT_PATTERN, SORTS, UNSET,
} from './listing-order';

const id = '5fa6676c-1ef9-4825-aeae-61c53329a303';
const row = { id, created_at: new Date('2026-11-27T12:00:00.123Z'), position_value: '2026-11-27T12:00:00.123456Z' };

const refusal = (f: () => unknown): string | undefined => {
  try {
    f();
  } catch (err) {
    return err instanceof ApiError ? `${err.code}:${String((err.details?.fields as Array<{ field: string }>)?.[0]?.field)}` : 'not an ApiError';
  }
  return undefined;
};

describe('listing order', () => {
  it('reads each key both ways, the default newest created first', () => {
    expect(SORTS).toEqual(['created_at', '-created_at', 'updated_at', '-updated_at', 'timestamp', '-timestamp']);
    expect(listingOrder()).toEqual({ sort: '-created_at', key: 'created_at', descending: true });
    expect(listingOrder('timestamp')).toEqual({ sort: 'timestamp', key: 'timestamp', descending: false });
  });

  it('orders by its column, then id, one way', () => {
    expect(orderBy(listingOrder('-updated_at'), 'i')).toBe('i."updated_at" DESC, i.id DESC');
    expect(orderBy(listingOrder('timestamp'))).toBe('"timestamp" ASC, id ASC');
  });

  it('pages after a position with a row comparison the way it goes', () => {
    const params: unknown[] = [];
    const p = (v: unknown) => `$${params.push(v)}`;
    expect(afterSql(listingOrder('updated_at'), 'w', { value: row.position_value, id }, p)).toBe('(w."updated_at", w.id) > ($1::timestamptz, $2::uuid)');
    expect(afterSql(listingOrder('-timestamp'), 'i', { value: row.position_value, id }, p)).toBe('(i."timestamp", i.id) < ($3::timestamptz, $4::uuid)');
    expect(params).toEqual([row.position_value, id, row.position_value, id]);
  });

  it('the default keeps the cursors it always issued (milliseconds of created_at, list `items`)', () => {
    const order = listingOrder(DEFAULT_SORT);
    const cursor = cursorAfter(order, row);
    expect(cursor).toBe(encodeCursor({ createdAt: '2026-11-27T12:00:00.123Z', id }, 'items'));
    expect(positionOf(order, cursor)).toEqual({ value: '2026-11-27T12:00:00.123Z', id });
  });

  it('other orders carry the value to the microsecond', () => {
    const order = listingOrder('-updated_at');
    expect(positionOf(order, cursorAfter(order, row))).toEqual({ value: row.position_value, id });
    expect(positionOf(order, undefined)).toBeUndefined();
  });

  it('a cursor pages only the order that issued it: another is 400 validation_error naming cursor', () => {
    const cursors = new Map(SORTS.map((sort) => [sort, cursorAfter(listingOrder(sort), row)]));
    for (const [issuedBy, cursor] of cursors) {
      for (const sort of SORTS) {
        if (sort === issuedBy) expect(refusal(() => positionOf(listingOrder(sort), cursor))).toBeUndefined();
        else expect([issuedBy, sort, refusal(() => positionOf(listingOrder(sort), cursor))]).toEqual([issuedBy, sort, 'validation_error:cursor']);
      }
    }
    // Cursors of before lists were named page only the order they were issued for, the default.
    const unnamed = Buffer.from(JSON.stringify(['2026-11-27T12:00:00.123Z', id])).toString('base64url');
    expect(positionOf(listingOrder(), unnamed)).toEqual({ value: '2026-11-27T12:00:00.123Z', id });
    expect(refusal(() => positionOf(listingOrder('-updated_at'), unnamed))).toBe('validation_error:cursor');
  });

  describe('by a property', () => {
    const parts = (cursor: string) => JSON.parse(Buffer.from(cursor, 'base64url').toString()) as string[];
    const cursorOf = (p: string[]) => Buffer.from(JSON.stringify(p)).toString('base64url');

    it('reads properties.<path> either way, the path as a property clause takes it', () => {
      expect(listingOrder('properties.priority')).toEqual({ sort: 'properties.priority', path: ['priority'], descending: false });
      expect(listingOrder('-properties.lines.0.sku')).toEqual({ sort: '-properties.lines.0.sku', path: ['lines', '0', 'sku'], descending: true });
      const longest = Array.from({ length: 8 }, () => 'k'.repeat(100)).join('.');
      const bad = ['properties.', 'properties.a..b', '-', '', '-properties.', 'properties', 'properties.a b', `properties.${longest}.k`, `properties.${'k'.repeat(101)}`, '--properties.a'];
      for (const sort of bad) expect([sort, isSort(sort), new RegExp(SORT_PATTERN).test(sort)]).toEqual([sort, false, false]);
      for (const sort of [...SORTS, 'properties.a', `-properties.${longest}`, 'properties.NULL']) expect([sort, isSort(sort), new RegExp(SORT_PATTERN).test(sort)]).toEqual([sort, true, true]);
      expect([isSort(['created_at']), isSort(undefined), listingOrderOf('x')]).toEqual([false, false, undefined]);
      expect(refusal(() => listingOrder('properties.'))).toBe('validation_error:sort');
    });

    it('orders by the value with null as none, none last either way, then id', () => {
      expect(orderBy(listingOrder('properties.a.b'), 'i')).toBe(`nullif(i.properties #> '{"a","b"}'::text[], 'null'::jsonb) ASC NULLS LAST, i.id ASC`);
      expect(orderBy(listingOrder('-properties.NULL'))).toBe(`nullif(properties #> '{"NULL"}'::text[], 'null'::jsonb) DESC NULLS LAST, id DESC`);
      expect(orderBy(listingOrder('-properties.a'), 'w', 'w.order_value')).toBe('w.order_value DESC NULLS LAST, w.id DESC');
    });

    it('pages after a value (then come the rest and the group without one), or inside that group', () => {
      const params: unknown[] = [];
      const p = (v: unknown) => `$${params.push(v)}`;
      const v = `nullif(i.properties #> '{"a"}'::text[], 'null'::jsonb)`;
      expect(afterSql(listingOrder('properties.a'), 'i', { value: '3', id }, p)).toBe(`(${v} IS NULL OR (${v}, i.id) > ($1::jsonb, $2::uuid))`);
      expect(afterSql(listingOrder('-properties.a'), 'i', { value: UNSET, id }, p)).toBe(`(${v} IS NULL AND i.id < $3::uuid)`);
      expect(params).toEqual(['3', id, id]);
    });

    it('cursors carry the jsonb text, or null for none, in a list of the path and direction', () => {
      const order = listingOrder('-properties.a');
      for (const value of ['3', '12345678901234567890.5', '"x"', '{"a": [1, null]}', '[]', 'true']) {
        const cursor = cursorAfter(order, { ...row, position_value: value });
        expect(parts(cursor)).toEqual([value, id, 'items?sort=-properties.a']);
        expect(positionOf(order, cursor)).toEqual({ value, id });
      }
      expect(positionOf(order, cursorAfter(order, { ...row, position_value: null }))).toEqual({ value: UNSET, id });
      for (const other of ['properties.a', '-properties.b', '-properties.a.b', '-updated_at']) {
        expect([other, refusal(() => positionOf(listingOrder(other), cursorAfter(order, { ...row, position_value: '1' })))]).toEqual([other, 'validation_error:cursor']);
      }
    });

    it('refuses a forged value PostgreSQL would not read as jsonb, or one longer than a cursor carries', () => {
      const order = listingOrder('properties.a');
      const list = 'items?sort=properties.a';
      for (const value of ['1e-100000', '1e1001', '1e1000', `${'9'.repeat(1001)}`, '"\\u0000"', '{"\\u0000":1}', '"\\udc00"', 'NaN', '', ' ', '[1,]', 'sha256:0',
        `"${'x'.repeat(MAX_CURSOR_VALUE - 1)}"`, `{"k":${'['.repeat(70)}${']'.repeat(70)}}`]) {
        expect([value.slice(0, 30), refusal(() => positionOf(order, cursorOf([value, id, list])))]).toEqual([value.slice(0, 30), 'validation_error:cursor']);
      }
      for (const value of ['1e300', '1e-999', '"a \\"quoted\\" [1] 2e99999"', `"${'x'.repeat(MAX_CURSOR_VALUE - 2)}"`, '-0.5']) {
        expect(positionOf(order, cursorOf([value, id, list]))).toEqual({ value, id });
      }
      expect(refusal(() => positionOf(order, cursorOf(['1', 'nope', list])))).toBe('validation_error:cursor');
    });

    it('a value longer than a cursor carries goes as its digest, which the item\'s value must still match', async () => {
      const order = listingOrder('properties.a');
      const long = JSON.stringify('y'.repeat(MAX_CURSOR_VALUE));
      const position = positionOf(order, cursorAfter(order, { ...row, position_value: long }))!;
      expect(position.value).toMatch(/^sha256:[0-9a-f]{64}$/);
      const seen: unknown[][] = [];
      // The item's row as the statement reads it: none when it is gone (or not readable).
      const valueIs = (value: string | null | undefined) => ({
        query: async <T>(sql: string, params?: unknown[]) => (seen.push([sql, params]), (value === undefined ? [] : [{ value }]) as T),
      });
      expect(await longValuePosition(valueIs(long), position, order, 'tenant-1')).toEqual({ value: long, id });
      expect(seen[0]).toEqual([`SELECT (nullif(i.properties #> '{"a"}'::text[], 'null'::jsonb))::text AS value FROM items i WHERE i.tenant_id = $1 AND i.id = $2`, ['tenant-1', id]]);
      for (const now of [`${long} `, '"short"', null, undefined]) expect(await longValuePosition(valueIs(now), position, order, 'tenant-1')).toBeUndefined();
      await longValuePosition(valueIs(long), position, order, 'tenant-1', ['core.note']);
      expect(seen.at(-1)).toEqual([expect.stringMatching(/ AND i\.id = \$2 AND i\.type = ANY\(\$3::text\[\]\)$/), ['tenant-1', id, ['core.note']]]);
    });
  });
});
