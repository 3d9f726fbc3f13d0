import { ApiError } from './api-error';
import { decodeCursor, encodeCursor } from './pagination';

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
