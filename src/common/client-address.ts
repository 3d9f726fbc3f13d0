/**
 * The unit a client address is counted in, for every count or limit kept per client address
 * (the per-IP rate limits, rate-limit.hook.ts; the sign-in throttle's count per address,
 * sign-in-throttle.ts). What is logged or audited as the client's address is the address itself;
 * only the keys of counts use this.
 *
 * An IPv4 address is one client's, so it counts alone. An IPv6 subscriber is given at least a
 * whole /64 (RFC 6177 recommends more, commonly a /56 or /48; SLAAC and privacy addresses,
 * RFC 4941, choose the low 64 bits freely), so one client can send from 2^64 addresses: counted
 * per address, it would start a fresh count with each. IPv6 addresses count per /64 instead, the
 * smallest block one subscriber is routinely given. An IPv4-mapped address (`::ffff:a.b.c.d`, as
 * a dual-stack socket reports an IPv4 peer) and one under the well-known NAT64 prefix
 * (`64:ff9b::/96`, RFC 6052, as an IPv6-only service behind a translator sees IPv4 clients) are
 * that IPv4 client's, and count as it does: their /64 would lump every such client together.
 *
 * Some proxies write the client's port beside its address (`203.0.113.7:51234`,
 * `[2001:db8::1]:443`): counted as written, each new connection would start a fresh count. The
 * port is dropped. Whatever is still not an address (`unknown`, or any text a client sends under
 * TRUST_PROXY=true) counts in one bucket for all such values, not one per text: a client varying
 * it would otherwise escape every per-address limit, each variant a key of its own in Redis.
 */
import ipaddr from 'ipaddr.js';
import { isIP } from 'node:net';

const NAT64_WELL_KNOWN = ipaddr.parseCIDR('64:ff9b::/96');

/** The one bucket of every client address that is not an address. */
export const NOT_AN_ADDRESS = 'not-an-address';

/** `a.b.c.d:port` → `a.b.c.d`, `[v6]:port` and `[v6]` → `v6`; anything else as it is. */
function withoutPort(address: string): string {
  return /^\[([^\]]+)\](?::\d{1,5})?$/.exec(address)?.[1] ?? /^(\d{1,3}(?:\.\d{1,3}){3}):\d{1,5}$/.exec(address)?.[1] ?? address;
}

/**
 * The key `ip` is counted under: an IPv4 address (or an IPv4 address embedded as above) in
 * dotted-decimal form, any other IPv6 address as its /64 in canonical form (RFC 5952, e.g.
 * `2001:db8:1:2::/64`, without a zone); a port beside it dropped; NOT_AN_ADDRESS for anything
 * else (`node:net`'s isIP).
 */
export function addressBucket(given: string): string {
  const ip = withoutPort(given);
  const kind = isIP(ip);
  if (kind === 0) return NOT_AN_ADDRESS;
  if (kind === 4) return ip; // strictly dotted-decimal, as isIP wants it
  let v6: ipaddr.IPv6;
  try {
    v6 = ipaddr.IPv6.parse(withHexTail(ip.split('%', 1)[0]));
  } catch {
    return NOT_AN_ADDRESS;
  }
  if (v6.isIPv4MappedAddress() || v6.match(NAT64_WELL_KNOWN)) {
    const [, , , , , , high, low] = v6.parts;
    return new ipaddr.IPv4([high >> 8, high & 0xff, low >> 8, low & 0xff]).toString();
  }
  return `${new ipaddr.IPv6([...v6.parts.slice(0, 4), 0, 0, 0, 0]).toString()}/64`;
}

/**
 * An IPv6 address's dotted-decimal tail (`::ffff:203.0.113.7`) as two hex groups, so that it
 * parses as written: ipaddr.js reads the deprecated IPv4-compatible `::a.b.c.d` as the mapped
 * `::ffff:a.b.c.d`, which would count one address in two places, as IPv4 written so and in `::/64`
 * written in hex.
 */
function withHexTail(address: string): string {
  return address.replace(/(\d+)\.(\d+)\.(\d+)\.(\d+)$/, (_, a: string, b: string, c: string, d: string) =>
    `${((Number(a) << 8) | Number(b)).toString(16)}:${((Number(c) << 8) | Number(d)).toString(16)}`,
  );
}
