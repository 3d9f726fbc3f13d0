/**
 * Range requests of a blob download (RFC 9110 14): one byte range, so that a client can resume
 * a download cut midway or read part of a large file. Several ranges in one request are served
 * as the whole content (a server may ignore Range; multipart/byteranges buys clients nothing
 * here), and so is a Range that does not parse or names another unit.
 */

/** First and last byte offsets, both included, within the content. */
export interface ByteRange {
  start: number;
  end: number;
}

export const UNSATISFIABLE = 'unsatisfiable';

const SPEC = /^bytes=[ \t]*(\d*)-(\d*)[ \t]*$/i;

/**
 * The range `header` asks for of `size` bytes: undefined for the whole content, UNSATISFIABLE
 * when it starts past the end (any `first-` of an empty blob included) or asks for the last 0
 * bytes: 416. A range running past the end is cut at it. A suffix of an empty blob is
 * satisfiable but has no Content-Range to say so (RFC 9110 14.1.1): the whole, empty, content.
 */
export function requestedRange(header: string | undefined, size: number): ByteRange | typeof UNSATISFIABLE | undefined {
  const m = header === undefined ? null : SPEC.exec(header);
  if (!m) return undefined;
  const [, first, last] = m;
  if (first === '' && last === '') return undefined;
  if (first === '') {
    const suffix = Number(last);
    if (suffix === 0) return UNSATISFIABLE;
    return size === 0 ? undefined : { start: Math.max(0, size - suffix), end: size - 1 };
  }
  const start = Number(first);
  if (last !== '' && Number(last) < start) return undefined;
  if (start >= size) return UNSATISFIABLE;
  return { start, end: last === '' ? size - 1 : Math.min(Number(last), size - 1) };
}

/**
 * If-Range (RFC 9110 13.1.5): the range holds only while the content is the one the client
 * has, which a strong entity tag names exactly; a weak tag or a date (the download sends no
 * Last-Modified) never matches, and the whole content is sent.
 */
export function rangeStillApplies(ifRange: string | undefined, etag: string): boolean {
  return ifRange === undefined || ifRange.trim() === etag;
}

/** A 206's Content-Range, or a 416's, which names only the size (RFC 9110 14.4). */
export const contentRange = (range: ByteRange | typeof UNSATISFIABLE, size: number) =>
  range === UNSATISFIABLE ? `bytes */${size}` : `bytes ${range.start}-${range.end}/${size}`;
