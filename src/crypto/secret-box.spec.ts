import { randomBytes } from 'node:crypto';
import { open, seal } from './secret-box';

/** `sealed` with its tag cut to `bytes`. */
const shortTag = (sealed: string, bytes: number) => {
  const [version, iv, tag, ciphertext] = sealed.split('.');
  return [version, iv, Buffer.from(tag, 'base64url').subarray(0, bytes).toString('base64url'), ciphertext].join('.');
};

describe('secret box', () => {
  const key = randomBytes(32);

  it('opens what it sealed, for the same associated data only', () => {
    const sealed = seal(key, 'whsec_x', 'row-1');
    expect(open(key, sealed, 'row-1')).toBe('whsec_x');
    expect(() => open(key, sealed, 'row-2')).toThrow();
  });

  it('refuses a tag shorter than GCM\'s 16 bytes, which would be forged in far fewer tries', () => {
    const sealed = seal(key, 'whsec_x', 'row-1');
    for (const bytes of [4, 8, 12, 15]) expect(() => open(key, shortTag(sealed, bytes), 'row-1')).toThrow();
  });
});
