import { normalizeRedirect, redirectAllowlist } from './redirect-allowlist';

describe('the connector redirect allowlist', () => {
  const list = redirectAllowlist(' https://App.Example.com:443/done , http://127.0.0.1:8080/cb?x=1 ');

  it.each([
    ['https://app.example.com/done', true],
    ['HTTPS://APP.EXAMPLE.COM/done', true],
    ['https://app.example.com:443/a/../done', true],
    ['https://app.example.com/%64one', false],
    ['https://app.example.com/done/', false],
    ['https://app.example.com:8443/done', false],
    ['https://app.example.com/done#frag', false],
    ['https://user@app.example.com/done', false],
    ['http://127.0.0.1:8080/cb?x=1', true],
    ['http://127.0.0.1:8080/cb', false],
    ['javascript:alert(1)', false],
    ['not a url', false],
  ])('%s allowed: %s', (uri, allowed) => {
    const normalized = normalizeRedirect(uri);
    expect(normalized !== undefined && list.has(normalized)).toBe(allowed);
  });
});
