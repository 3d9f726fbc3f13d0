import { guardedLookup, isPublicAddress, literalAddressProblem, TargetRefused, urlProblem } from './target-policy';

describe('webhook target policy', () => {
  it.each(['93.184.216.34', '8.8.8.8', '2606:4700::1111'])('treats %s as public', (a) => expect(isPublicAddress(a)).toBe(true));

  it.each([
    '127.0.0.1', '10.0.0.1', '172.16.5.4', '192.168.1.1', '169.254.169.254', '100.64.0.1', '0.0.0.0', '224.0.0.1',
    '255.255.255.255', '::1', '::', 'fe80::1', 'fd00::1', '::ffff:127.0.0.1', '::ffff:10.0.0.1',
    // IPv4-compatible (deprecated), NAT64, 6to4, documentation and multicast forms.
    '::127.0.0.1', '::7f00:1', '::a00:1', '64:ff9b::7f00:1', '2002:7f00:1::1', '2001:db8::1', 'ff02::1',
  ])('treats %s as not public', (a) => expect(isPublicAddress(a)).toBe(false));

  it('wants https unless private targets are allowed, and no credentials in the URL', () => {
    expect(urlProblem('https://example.com/hook', false)).toBeUndefined();
    expect(urlProblem('http://example.com/hook', false)).toMatch(/https/);
    expect(urlProblem('http://127.0.0.1:9/hook', true)).toBeUndefined();
    expect(urlProblem('ftp://example.com/', true)).toMatch(/https/);
    expect(urlProblem('not a url', true)).toMatch(/absolute/);
    expect(urlProblem('https://user:pw@example.com/', true)).toMatch(/credentials/);
  });

  it('refuses what the URL parser would call otherwise than stored: whitespace, control characters, backslashes, port 0', () => {
    for (const text of [' http://127.0.0.1:4191/a ', 'http://127.0.0.1:4191/a\nb', 'http://127.0.0.1:4191/a\tb', 'https://example.com/a b',
      'https://example.com\\hook', 'https://example.com/a\u0000', 'https://example.com/a\u007f', 'https://example.com/\u00a0']) {
      expect(urlProblem(text, true)).toMatch(/whitespace, control characters or backslashes/);
    }
    expect(urlProblem('http://127.0.0.1:0/hook', true)).toMatch(/port 0/);
    expect(urlProblem('https://example.com:00/hook', true)).toMatch(/port 0/);
    expect(urlProblem('https://example.com:8443/a%20b?q=1#f', false)).toBeUndefined();
  });

  it.each([
    ['http:127.0.0.1:4190/odd1', 'http://127.0.0.1:4190/odd1'],
    ['http:/127.0.0.1:4190/odd2', 'http://127.0.0.1:4190/odd2'],
    ['http:///127.0.0.1:4190/odd3', 'http://127.0.0.1:4190/odd3'],
    ['http://127.0.0.1:4190/a/../odd4', 'http://127.0.0.1:4190/odd4'],
    ['http://127.0.0.1:4190/odd5\u00e9', 'http://127.0.0.1:4190/odd5%C3%A9'],
    ['http://127.1:4190/odd6', 'http://127.0.0.1:4190/odd6'],
    ['https://b\u00fccher.example/', 'https://xn--bcher-kva.example/'],
  ])('refuses %s, which deliveries would go to as %s, naming that form', (text, href) => {
    expect(urlProblem(text, true)).toBe(`must be written as the URL deliveries go to: ${href}`);
  });

  it.each(['https://Example.COM/hook', 'HTTPS://example.com/hook', 'https://example.com', 'https://example.com?q=1', 'https://example.com/hook?a=1&b=%2F',
    'https://example.com/a%C3%A9%20b', 'https://example.com/a%c3%a9', 'https://example.com/Case/Kept', 'http://[::1]:4190/x'])(
    'accepts %s, which deliveries go to as written', (text) => expect(urlProblem(text, true)).toBeUndefined(),
  );

  const lookup = (host: string, allowPrivate: boolean, protocol: 'http:' | 'https:' = 'https:') =>
    new Promise<unknown>((resolve) => guardedLookup(allowPrivate, protocol)(host, {}, (err, address) => resolve(err ?? address)));

  it('refuses at connection time a name that resolves to a private address (DNS rebinding)', async () => {
    expect(await lookup('localhost', false)).toBeInstanceOf(TargetRefused);
    expect(await lookup('localhost', true)).toMatch(/^(127\.0\.0\.1|::1)$/);
    expect(await lookup('localhost', true, 'http:')).toMatch(/^(127\.0\.0\.1|::1)$/);
  });

  it('refuses plain http to a public address at connection time and for a literal one, private targets allowed or not', async () => {
    for (const allowPrivate of [true, false]) {
      expect(await lookup('1.1.1.1', allowPrivate, 'http:')).toBeInstanceOf(TargetRefused);
      expect(await lookup('1.1.1.1', allowPrivate, 'https:')).toBe('1.1.1.1');
      expect(literalAddressProblem(new URL('http://1.1.1.1:4199/x'), allowPrivate)).toBe('refused: plain http to 1.1.1.1, a public address: use https');
      expect(literalAddressProblem(new URL('https://1.1.1.1/x'), allowPrivate)).toBeUndefined();
    }
    expect(literalAddressProblem(new URL('http://127.0.0.1:4199/x'), true)).toBeUndefined();
    expect(literalAddressProblem(new URL('https://127.0.0.1/x'), false)).toBe('refused: 127.0.0.1 is not a public address');
  });
});
