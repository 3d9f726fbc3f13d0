/**
 * Where the service may send requests of its own (SSRF): webhook deliveries and connector token
 * exchanges. HTTPS to public addresses; plain http only to local-development targets (names
 * that resolve to non-public addresses only). Unless private targets are
 * allowed (WEBHOOK_ALLOW_PRIVATE_TARGETS, the default outside production), plain http and any
 * address that is not public unicast (private, loopback, link-local and so cloud metadata,
 * carrier-grade NAT, unique-local, multicast, reserved…) are refused. The check runs on every
 * address a name resolves to, at registration and again at each delivery, inside the
 * connection's own DNS lookup (`guardedLookup`), so a name that re-resolves to a private
 * address later (DNS rebinding) is caught where it would be used. Redirects are not followed.
 */
import ipaddr from 'ipaddr.js';
import { lookup as dnsLookup, LookupAddress } from 'node:dns';
import { isIP } from 'node:net';
import { Agent, buildConnector } from 'undici';

/**
 * Host names of the user's own machine, the only ones plain http may name in URLs a browser is
 * sent to or a manifest declares (OAuth redirect URIs, integration OAuth URLs): RFC 8252 8.3.
 */
export const LOOPBACK_HOSTS: ReadonlySet<string> = new Set(['127.0.0.1', '[::1]', 'localhost']);

/** Global unicast IPv6 (RFC 4291 2.4): ipaddr.js calls everything it has no name for "unicast", the deprecated IPv4-compatible ::a.b.c.d included. */
const GLOBAL_UNICAST_V6 = ipaddr.parseCIDR('2000::/3');

export function isPublicAddress(address: string): boolean {
  let parsed = ipaddr.parse(address);
  if (parsed.kind() === 'ipv6' && (parsed as ipaddr.IPv6).isIPv4MappedAddress()) parsed = (parsed as ipaddr.IPv6).toIPv4Address();
  return parsed.range() === 'unicast' && (parsed.kind() === 'ipv4' || parsed.match(GLOBAL_UNICAST_V6));
}

/**
 * Characters the URL parser drops or rewrites (surrounding spaces, tabs and newlines anywhere,
 * `\` read as `/`), or that have no place in a URL unencoded.
 */
const REWRITTEN_CHARS = /[\s\x00-\x1f\x7f-\x9f\\]/;

/** Where an empty path would go: `https://example.com?q` is `https://example.com/?q` to the parser and on the wire. */
const EMPTY_PATH = /^([a-z][a-z\d+.-]*:\/\/[^/?#]*)(?=[?#]|$)/i;

/** ASCII letters only: the parser changes case only in scheme and host, where case means nothing; a non-ASCII letter it always encodes. */
function asciiLower(text: string): string {
  return text.replace(/[A-Z]/g, (c) => c.toLowerCase());
}

/**
 * Why a URL may not be a webhook target (syntax and scheme only), or undefined. A URL is stored
 * as sent and parsed again at each attempt, so one the parser would call as another (a stripped
 * newline, a `\` read as `/`, `http:/host`, `/a/../b`, an unencoded `é`, `127.1`) is refused
 * rather than shown as something it is not, and told the form it would be called as; so is
 * port 0, which nothing listens on.
 */
export function urlProblem(text: string, allowPrivate: boolean): string | undefined {
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    return 'must be an absolute http(s) URL';
  }
  if (REWRITTEN_CHARS.test(text)) return 'must not contain whitespace, control characters or backslashes (percent-encode them)';
  if (url.protocol !== 'https:' && url.protocol !== 'http:') return 'must be an https URL';
  if (url.protocol === 'http:' && !allowPrivate) return 'must be an https URL (plain http is for local development only)';
  if (url.username || url.password) return 'must not carry credentials';
  if (url.port === '0') return 'must not name port 0';
  if (!isWrittenAsParsed(text, url)) return `must be written as the URL deliveries go to: ${url.href}`;
  return undefined;
}

/**
 * Whether `text` is the URL `url` (its parse) goes to, as written: its href, ignoring ASCII case,
 * with `/` for an empty path. Any other URL stored as text (integration manifests' OAuth URLs)
 * is held to it too.
 */
export function isWrittenAsParsed(text: string, url: URL): boolean {
  return asciiLower(url.href) === asciiLower(text.replace(EMPTY_PATH, '$1/'));
}

function hostOf(url: URL): string {
  return url.hostname.replace(/^\[|\]$/g, '');
}

export class TargetRefused extends Error {}

/**
 * The address a request over `protocol` may not go to, of all its host resolves to: a public
 * one over plain http (`exposed`), or, unless private targets are allowed, one that is not public.
 */
function refusedAddress(protocol: string, addresses: readonly string[], allowPrivate: boolean): { address: string; exposed: boolean } | undefined {
  const exposed = protocol === 'http:' ? addresses.find(isPublicAddress) : undefined;
  if (exposed) return { address: exposed, exposed: true };
  const blocked = allowPrivate ? undefined : addresses.find((a) => !isPublicAddress(a));
  return blocked === undefined ? undefined : { address: blocked, exposed: false };
}

function addressProblem(protocol: string, addresses: readonly string[], allowPrivate: boolean): string | undefined {
  const refused = refusedAddress(protocol, addresses, allowPrivate);
  if (!refused) return undefined;
  return refused.exposed
    ? `resolves to ${refused.address}, a public address: use https (plain http is for local-development targets)`
    : `resolves to ${refused.address}, which is not a public address`;
}

/** Resolves the URL's host and refuses it when any address is not public (unless allowed), or plain http reaches a public one. */
export async function assertTargetAddress(text: string, allowPrivate: boolean): Promise<void> {
  const url = new URL(text);
  const host = hostOf(url);
  const addresses = isIP(host) ? [host] : (await lookupAll(host)).map((a) => a.address);
  const problem = addressProblem(url.protocol, addresses, allowPrivate);
  if (problem) throw new TargetRefused(problem);
}

function lookupAll(host: string): Promise<LookupAddress[]> {
  return new Promise((resolve, reject) =>
    dnsLookup(host, { all: true }, (err, addresses) => (err ? reject(new TargetRefused(`does not resolve (${err.code ?? err.message})`)) : resolve(addresses))),
  );
}

type LookupCallback = (err: NodeJS.ErrnoException | null, address: string | LookupAddress[], family?: number) => void;

/** A connection's `lookup` that refuses, at connection time, what `assertTargetAddress` refuses. */
export function guardedLookup(allowPrivate: boolean, protocol: 'http:' | 'https:') {
  return (hostname: string, options: { all?: boolean }, callback: LookupCallback): void => {
    dnsLookup(hostname, { ...options, all: true }, (err, addresses) => {
      if (err) return callback(err, []);
      const problem = addressProblem(protocol, addresses.map((a) => a.address), allowPrivate);
      if (problem) return callback(new TargetRefused(`${hostname} ${problem}`), []);
      if (options.all) return callback(null, addresses);
      callback(null, addresses[0].address, addresses[0].family);
    });
  };
}

/**
 * An undici Agent whose connections resolve names through `guardedLookup`, for the protocol of
 * each. Literal addresses skip DNS, so a request also needs `literalAddressProblem` checked first.
 */
export function guardedAgent(allowPrivate: boolean, options: Omit<Agent.Options, 'connect'> = {}): Agent {
  const plain = buildConnector({ lookup: guardedLookup(allowPrivate, 'http:') } as buildConnector.BuildOptions);
  const secure = buildConnector({ lookup: guardedLookup(allowPrivate, 'https:') } as buildConnector.BuildOptions);
  return new Agent({ ...options, connect: (opts, callback) => (opts.protocol === 'http:' ? plain : secure)(opts, callback) });
}

/** A failed request's reason: the cause's message where undici wraps one (a refused address, a reset). */
export function requestErrorText(err: Error): string {
  const cause = (err as { cause?: unknown }).cause;
  return cause instanceof Error ? cause.message : err.message;
}

/** Why a URL whose host is a literal IP address may not be called, or undefined. */
export function literalAddressProblem(url: URL, allowPrivate: boolean): string | undefined {
  const host = hostOf(url);
  const refused = isIP(host) ? refusedAddress(url.protocol, [host], allowPrivate) : undefined;
  if (!refused) return undefined;
  return refused.exposed ? `refused: plain http to ${host}, a public address: use https` : `refused: ${host} is not a public address`;
}
