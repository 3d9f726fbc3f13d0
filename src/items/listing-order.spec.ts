import { ApiError } from '../common/api-error';
import { encodeCursor } from '../common/pagination';
import { afterSql, cursorAfter, DEFAULT_SORT, listingOrder, orderBy, positionOf, SORTS } from './listing-order';

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
});
