import { thrownApiError } from '../../test/support/thrown';
import { uploadMediaType } from './blob-media-type';

describe('uploadMediaType', () => {
  it('defaults to application/octet-stream', () => {
    expect(uploadMediaType(undefined)).toBe('application/octet-stream');
    expect(uploadMediaType('  ')).toBe('application/octet-stream');
  });

  it('keeps a well-formed media type as sent', () => {
    expect(uploadMediaType('image/png')).toBe('image/png');
    expect(uploadMediaType(' text/plain; charset=UTF-8 ')).toBe('text/plain; charset=UTF-8');
    expect(uploadMediaType('application/vnd.api+json')).toBe('application/vnd.api+json');
  });

  it.each(['png', 'image/', '/png', 'image png', 'text/plain; x=\u00e9', `a/${'b'.repeat(300)}`])('rejects %j with 400 invalid_request', (bad) => {
    expect(thrownApiError(() => uploadMediaType(bad))?.code).toBe('invalid_request');
  });
});
