import { bodyParserError, isPercentEncoded } from './body-parsing';

/** Errors shaped like the ones body-parser (http-errors) raises. */
function raised(type: string | undefined, status: number, extra: Record<string, unknown> = {}): Error {
  return Object.assign(new Error('raw parser message'), { type, status, statusCode: status, expose: true, ...extra });
}

describe('bodyParserError', () => {
  it('maps malformed JSON to 400 invalid_request', () => {
    const e = bodyParserError(raised('entity.parse.failed', 400));
    expect([e.status, e.code]).toEqual([400, 'invalid_request']);
  });

  it('maps an oversized body to 413 invalid_request with the limit', () => {
    const e = bodyParserError(raised('entity.too.large', 413, { limit: 1024, length: 5000 }));
    expect([e.status, e.code, e.details]).toEqual([413, 'invalid_request', { limit_bytes: 1024 }]);
  });

  it.each(['encoding.unsupported', 'charset.unsupported'])('maps %s to 415 invalid_request', (type) => {
    const e = bodyParserError(raised(type, 415));
    expect([e.status, e.code]).toEqual([415, 'invalid_request']);
  });

  it('maps a body that does not inflate (no type, status 400) to 400 invalid_request, not a 500', () => {
    const e = bodyParserError(raised(undefined, 400));
    expect([e.status, e.code]).toEqual([400, 'invalid_request']);
    expect(e.message).not.toContain('raw parser message');
  });
});

describe('isPercentEncoded', () => {
  it.each(['', 'a=b&c=d', 'label=caf%C3%A9+%F0%9F%94%91', 'a%3D=b%26', '=&&=', 'a+b=100%25'])('takes %j', (text) => {
    expect(isPercentEncoded(text)).toBe(true);
  });

  it.each(['label=%FF', 'label=ok%C3%A9%FF', 'label=%ED%A0%80', 'a=%C3', 'a=%C3&%A9', 'a=%zz', 'a=100%', '%FF=x'])('refuses %j', (text) => {
    expect(isPercentEncoded(text)).toBe(false);
  });
});
