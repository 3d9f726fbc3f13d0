import { chosenEncoding } from './compression';

describe('chosenEncoding', () => {
  it.each([
    ['gzip', 'gzip'],
    ['gzip, deflate, br', 'br'],
    ['deflate, gzip, br, zstd', 'br'],
    ['gzip;q=1, br;q=0.5', 'gzip'],
    ['*', 'br'],
    ['gzip;q=0, *', 'br'],
    ['br;q=0, gzip;q=0, *', 'deflate'],
    ['br;q=0, *;q=0.5, gzip;q=0.8', 'gzip'],
    ['X-GZIP', 'gzip'],
    ['GZip ; Q=0.7', 'gzip'],
    ['identity', 'identity'],
    ['', 'identity'],
    ['*;q=0', 'identity'],
    ['zstd', 'identity'],
    ['gzip;q=2', 'identity'],
    ['gzip;q=0.0001', 'identity'],
    ['gzip;level=9', 'identity'],
  ])('"%s" → %s', (header, encoding) => {
    expect(chosenEncoding(header)).toBe(encoding);
  });
});
