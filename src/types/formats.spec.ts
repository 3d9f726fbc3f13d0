import { fullFormats } from 'ajv-formats/dist/formats';
import fc from 'fast-check';
import Ajv from 'ajv';
import { addSafeFormats, isByte, isUrl } from './formats';

/** ajv-formats' own `url`: a regular expression that backtracks in time quadratic in some values' length. */
const ajvFormatsUrl = fullFormats.url as RegExp;

describe('formats', () => {
  describe('isUrl', () => {
    it.each([
      'http://foo.com/blah_blah', 'https://www.example.com/foo/?bar=baz&inga=42&quux', 'HTTPS://EXAMPLE.COM', 'ftp://foo.bar/baz',
      'http://userid:password@example.com:8080/', 'http://userid@example.com', 'http://a@b@c.com', 'http://-.~_!$&\'()*+,;=:%40:80%2f::::::@example.com',
      'http://142.42.1.1:8080/', 'http://223.255.255.254', 'http://✪df.ws/123', 'http://例子.测试', 'http://a.b-c.de', 'http://c.com:12/x',
      'http://c.com/a:b@c', 'http://a\u3000b.com', 'httpſ://example.com',
      // and refused
      'http://', 'http://.', 'http://?', 'http://#', '//a', 'foo.com', 'rdar://1234', 'ftps://foo.bar/', 'http:// shouldfail.com',
      'http://foo.bar/foo(bar)baz quux', 'http://-error-.invalid/', 'http://a.b--c.de/', 'http://a.b-.co', 'http://10.1.1.1', 'http://192.168.0.1',
      'http://172.16.0.1', 'http://224.1.1.1', 'http://1.1.1.1.1', 'http://3628126748', 'http://.www.foo.bar/', 'http://www.foo.bar./', 'http://a b@c.com',
      'http://@c.com', 'http://c.com:1', 'http://c.com:123456', 'http://c.com:12?x', 'http://a.c1', 'http://a.b/c\u3000', 'http://😀.com',
    ])('answers %j as ajv-formats\' url expression does', (value) => {
      expect(isUrl(value)).toBe(ajvFormatsUrl.test(value));
    });

    it('answers as ajv-formats\' url expression on short values made of the characters that matter to it', () => {
      const piece = fc.constantFrom(
        'http://', 'ftp://', 'a', 'Z', '0', '1', '10', '127', '172', '192', '168', '254', '255', 'é', '\u00a1', '\u3000', '\u00a0', '😀', '\ud83d',
        '.', '.', '-', ':', ':', '80', '123456', '/', '/', '@', '@', ' ', '\n', '?', '#', '%', 'com', '.com', 'user',
      );
      const value = fc.tuple(fc.constantFrom('http://', 'https://', 'FTP://', 'http:/', ''), fc.array(piece, { maxLength: 12 })).map(([s, p]) => s + p.join(''));
      fc.assert(
        fc.property(value, (v) => isUrl(v) === ajvFormatsUrl.test(v)),
        { numRuns: 5000 },
      );
    });

    // ajv-formats' expression takes a minute over the first of these (the auditor's 7 s at 66 kB
    // grows with the square of the length); they are here for the answers, which it gives too.
    const adversarial = (prefix: string, unit: string, suffix: string) => prefix + unit.repeat(Math.ceil(200_000 / unit.length)) + suffix;
    it.each<[string, string, boolean]>([
      ['colons where an IPv6 host would be', adversarial('http://[', '1:', ']'), false],
      ['colons and no @', adversarial('http://', 'a:', '@'), false],
      ['colons, then user information ends', adversarial('http://', 'a:', '@example.com'), true],
      ['@s', adversarial('http://', 'a@', ''), false],
      ['hosts and paths, white space at the end', adversarial('http://', 'a@b.cc/', ' '), false],
      ['a long path', adversarial('http://example.com/', 'a/', ''), true],
      ['a long host', adversarial('http://', 'a-b.', 'com'), true],
    ])('answers a 200 kB value (%s) as the expression would', (_, value, answer) => {
      expect(isUrl(value)).toBe(answer);
    });
  });

  describe('byte', () => {
    it.each<[string, boolean]>([
      ['', true], ['QUJD', true], ['QUI=', true], ['QQ==', true], ['aGVsbG8gd29ybGQ+Pz8/', true],
      ['QUJ', false], ['Q===', false], ['QUJD\n', false], ['not base64\n', false], ['====\nQUJD', false], ['QUJD\nQUJD', false],
      ['QU JD', false], ['QUJD-_', false],
    ])('takes %j as base64: %s', (value, answer) => {
      expect(isByte(value)).toBe(answer);
      const ajv = new Ajv();
      addSafeFormats(ajv);
      expect(ajv.validate({ type: 'string', format: 'byte' }, value)).toBe(answer);
    });

    it('answers a 200 kB value whose last group is wrong', () => {
      expect(isByte('QUJD'.repeat(50_000) + 'Q')).toBe(false);
    });
  });
});
