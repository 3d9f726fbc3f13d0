import { randomBytes } from 'node:crypto';
import { open, openAny, parseKeyList, seal } from './secret-box';

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

  describe('with previous keys (SVC_ENCRYPTION_KEY_PREVIOUS)', () => {
    const [current, older, oldest] = [randomBytes(32), randomBytes(32), randomBytes(32)];

    it('opens with the current key first, then each previous one, telling which fitted', () => {
      expect(openAny([current, older, oldest], seal(current, 'a', 'row'), 'row')).toEqual({ plaintext: 'a', keyIndex: 0 });
      expect(openAny([current, older, oldest], seal(oldest, 'b', 'row'), 'row')).toEqual({ plaintext: 'b', keyIndex: 2 });
      expect(open([current, older], seal(older, 'c', 'row'), 'row')).toBe('c');
    });

    it('opens nothing sealed under a key not listed, nor for other associated data under a listed one', () => {
      expect(() => open([current, older], seal(oldest, 'a', 'row'), 'row')).toThrow('Unsupported state or unable to authenticate data');
      expect(() => open([current, older], seal(older, 'a', 'row-1'), 'row-2')).toThrow();
    });

    it('reads one key or a comma list of them, hex or base64, refusing any that is not 32 bytes', () => {
      expect(parseKeyList(undefined)).toEqual([]);
      expect(parseKeyList(`${older.toString('hex')}, ${oldest.toString('base64')}`)).toEqual([older, oldest]);
      expect(() => parseKeyList(`${older.toString('hex')},abcd`)).toThrow('SVC_ENCRYPTION_KEY_PREVIOUS must be 32 bytes');
    });
  });
});
