import { addressBucket, NOT_AN_ADDRESS } from './client-address';

describe('addressBucket: the unit a client address is counted in', () => {
  it.each([
    ['203.0.113.7', '203.0.113.7'],
    ['127.0.0.1', '127.0.0.1'],
    ['0.0.0.0', '0.0.0.0'],
  ])('an IPv4 address counts alone: %s → %s', (ip, bucket) => expect(addressBucket(ip)).toBe(bucket));

  it.each([
    ['::ffff:203.0.113.7', '203.0.113.7'],
    ['::ffff:cb00:7107', '203.0.113.7'],
    ['::FFFF:127.0.0.1', '127.0.0.1'],
    ['64:ff9b::203.0.113.7', '203.0.113.7'],
    ['64:ff9b::cb00:7107', '203.0.113.7'],
  ])('an IPv4 address embedded in IPv6 (mapped, NAT64) counts as that IPv4 address: %s → %s', (ip, bucket) =>
    expect(addressBucket(ip)).toBe(bucket),
  );

  it.each([
    ['2001:db8:1:2::1', '2001:db8:1:2::/64'],
    ['2001:db8:1:2:ffff:ffff:ffff:ffff', '2001:db8:1:2::/64'],
    ['2001:0DB8:0001:0002:a:b:c:d', '2001:db8:1:2::/64'],
    ['2001:db8::1', '2001:db8::/64'],
    ['2001:db8:0:0:1::', '2001:db8::/64'],
    ['2606:4700:4700::1111', '2606:4700:4700::/64'],
    ['fe80::1%eth0', 'fe80::/64'],
    ['fe80::1%eth0.1', 'fe80::/64'],
    ['1:2:3:4:5:6:1.2.3.4', '1:2:3:4::/64'],
    ['::1', '::/64'],
    ['::', '::/64'],
    ['64:ff9b:1::1', '64:ff9b:1::/64'],
  ])('any other IPv6 address counts per /64, in canonical form: %s → %s', (ip, bucket) => expect(addressBucket(ip)).toBe(bucket));

  it('addresses of one /64 share a bucket; of neighbouring /64s do not', () => {
    expect(addressBucket('2001:db8:1:2::1')).toBe(addressBucket('2001:db8:1:2:dead:beef:0:42'));
    expect(addressBucket('2001:db8:1:2::1')).not.toBe(addressBucket('2001:db8:1:3::1'));
    expect(addressBucket('2001:db8:1:2::1')).not.toBe(addressBucket('2001:db8:1:1::1'));
  });

  it('two IPv4 addresses never share a bucket, nor an IPv4 address and an IPv6 /64', () => {
    expect(addressBucket('203.0.113.7')).not.toBe(addressBucket('203.0.113.8'));
    expect(addressBucket('::ffff:203.0.113.7')).not.toBe(addressBucket('::ffff:203.0.113.8'));
    // The deprecated IPv4-compatible ::a.b.c.d is IPv6 however it is written (ipaddr.js alone would read it as mapped).
    expect(addressBucket('::203.0.113.7')).toBe('::/64');
    expect(addressBucket('::cb00:7107')).toBe('::/64');
  });

  it.each([
    ['203.0.113.7:51234', '203.0.113.7'],
    ['[2001:db8:1:2::1]:443', '2001:db8:1:2::/64'],
    ['[2001:db8:1:2::1]', '2001:db8:1:2::/64'],
    ['[::ffff:203.0.113.7]:80', '203.0.113.7'],
  ])('drops a port written beside the address, as some proxies write it: %s → %s', (ip, bucket) => expect(addressBucket(ip)).toBe(bucket));

  it.each(['', 'unknown', 'not an address', '127.1', '0x7f000001', '2001:db8::1::2', '2001:db8::/64', '300.1.1.1', ' 203.0.113.7', '1:2:3:4:5:6:7:1.2.3.4', '203.0.113.7:x', 'x'.repeat(12_000)])(
    'counts anything that is not an address in one bucket, whatever its text: %p',
    (text) => expect(addressBucket(text)).toBe(NOT_AN_ADDRESS),
  );
});
