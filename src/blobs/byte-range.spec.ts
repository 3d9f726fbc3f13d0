import { rangeStillApplies, requestedRange, UNSATISFIABLE } from './byte-range';

describe('requestedRange', () => {
  it.each([
    ['bytes=0-99', 1000, { start: 0, end: 99 }],
    ['bytes=100-', 1000, { start: 100, end: 999 }],
    ['bytes=-100', 1000, { start: 900, end: 999 }],
    ['bytes=-5000', 1000, { start: 0, end: 999 }],
    ['bytes=990-5000', 1000, { start: 990, end: 999 }],
    ['bytes=999-999', 1000, { start: 999, end: 999 }],
    ['BYTES= 5-9 ', 1000, { start: 5, end: 9 }],
  ])('%s of %d bytes is %j', (header, size, range) => {
    expect(requestedRange(header, size)).toEqual(range);
  });

  it.each([
    ['bytes=1000-', 1000],
    ['bytes=1000-2000', 1000],
    ['bytes=-0', 1000],
    ['bytes=0-', 0],
    ['bytes=-0', 0],
    ['bytes=99999999999999999999999-', 1000],
  ])('%s of %d bytes is unsatisfiable', (header, size) => {
    expect(requestedRange(header, size)).toBe(UNSATISFIABLE);
  });

  it('serves a suffix of an empty blob whole: satisfiable, with no Content-Range to say so (RFC 9110 14.1.1)', () => {
    expect(requestedRange('bytes=-1', 0)).toBeUndefined();
  });

  it.each([undefined, '', 'bytes=', 'bytes=-', 'bytes=9-5', 'bytes=0-1,5-9', 'items=0-5', 'bytes=a-b', 'bytes 0-5', 'bytes=0x10-'])(
    '%j is served whole',
    (header) => {
      expect(requestedRange(header, 1000)).toBeUndefined();
    },
  );
});

describe('rangeStillApplies', () => {
  it('holds without If-Range, and with the strong tag itself only', () => {
    expect(rangeStillApplies(undefined, '"abc"')).toBe(true);
    expect(rangeStillApplies(' "abc" ', '"abc"')).toBe(true);
    expect(rangeStillApplies('W/"abc"', '"abc"')).toBe(false);
    expect(rangeStillApplies('"abd"', '"abc"')).toBe(false);
    expect(rangeStillApplies('Sat, 28 Nov 2026 06:00:00 GMT', '"abc"')).toBe(false);
  });
});
