import { thrownApiError } from '../../test/support/thrown';
import { ParseBlobHashPipe, parseBlobHash } from './blob-hash';

const hex = 'a'.repeat(64);

describe('blob hashes', () => {
  it('accepts 64 lowercase hex digits, optionally prefixed sha256:', () => {
    expect(parseBlobHash(hex)).toBe(hex);
    expect(parseBlobHash(`sha256:${hex}`)).toBe(hex);
  });

  it.each(['', 'A'.repeat(64), 'a'.repeat(63), 'a'.repeat(65), `sha1:${hex}`, `sha256:sha256:${hex}`, `${hex}\n`])('rejects %j', (bad) => {
    expect(parseBlobHash(bad)).toBeUndefined();
  });

  it('the path pipe answers 400 invalid_id', () => {
    const pipe = new ParseBlobHashPipe();
    expect(pipe.transform(`sha256:${hex}`)).toBe(hex);
    const err = thrownApiError(() => pipe.transform('nope'));
    expect(err?.status).toBe(400);
    expect(err?.code).toBe('invalid_id');
  });
});
