/**
 * The `format`s item properties are checked with: ajv-formats' (full mode), except `url` and `byte`. Every
 * tenant's item writes are validated in one process, so each format must answer in time about
 * linear in the value's length, up to the body limit. ajv-formats' own were measured with
 * adversarial values of 200 kB and more: all answer in milliseconds but `url` (in fast mode too:
 * it is the same regular expression), whose `\S+(?::\S*)?@` before the host backtracks in time
 * quadratic in the number of `:` in a value without an `@` ("http://[" + "1:" × 22,000 + "]"
 * took 7 s, 200 kB 55 s), with the event loop held all along.
 */
import type Ajv from 'ajv';
import addFormats from 'ajv-formats';

/**
 * The pieces of ajv-formats' `url` expression (dperini's, https://gist.github.com/dperini/729294),
 * flags and all, each run on a part of the value where it cannot backtrack far: the scheme and
 * an IPv4 address are of bounded length, a label or top-level domain is one run of a class.
 */
const URL_SCHEME = /^(?:https?|ftp):\/\//iu;
const URL_IPV4 =
  /^(?!(?:10|127)(?:\.\d{1,3}){3})(?!(?:169\.254|192\.168)(?:\.\d{1,3}){2})(?!172\.(?:1[6-9]|2\d|3[0-1])(?:\.\d{1,3}){2})(?:[1-9]\d?|1\d\d|2[01]\d|22[0-3])(?:\.(?:1?\d{1,2}|2[0-4]\d|25[0-5])){2}(?:\.(?:[1-9]\d?|1\d\d|2[0-4]\d|25[0-4]))$/iu;
const URL_LABEL = /^[a-z0-9\u{00a1}-\u{ffff}]+(?:-[a-z0-9\u{00a1}-\u{ffff}]+)*$/iu;
const URL_TLD = /^[a-z\u{00a1}-\u{ffff}]{2,}$/iu;
const URL_PORT = /^:\d{2,5}(?!\d)/u;

/** A host as the `url` expression has it: a public IPv4 address, or dotted labels ending in a top-level domain of letters. */
function urlHost(host: string): boolean {
  if (URL_IPV4.test(host)) return true;
  const dot = host.lastIndexOf('.');
  return dot > 0 && URL_TLD.test(host.slice(dot + 1)) && host.slice(0, dot).split('.').every((label) => URL_LABEL.test(label));
}

const [AT, COLON, SLASH, DOT] = ['@', ':', '/', '.'].map((c) => c.charCodeAt(0));

/**
 * ajv-formats' `url` format, answering as its expression
 * `^(?:https?|ftp):\/\/(?:\S+(?::\S*)?@)?(?:<IPv4>|<domain>)(?::\d{2,5})?(?:\/[^\s]*)?$` (flags
 * `iu`) does, in linear time. After the scheme, the user information (`\S+(?::\S*)?`: any text
 * without white space, `:` and `@` included) ends at some `@`; the host runs from there (or from
 * the scheme) to the next `:` or `/` (it holds neither, nor an `@`, and has a `.`), then come an
 * optional port of 2-5 digits and an optional path of anything but white space, to the end. So
 * one pass tries the host after the scheme and after each `@` once (hosts are disjoint), and
 * white space is looked for twice beforehand.
 */
export function isUrl(value: string): boolean {
  const scheme = URL_SCHEME.exec(value);
  if (!scheme) return false;
  const rest = value.slice(scheme[0].length);
  const firstSpace = rest.search(/\s/u);
  const lastSpace = firstSpace < 0 ? -1 : /\s[^\s]*$/u.exec(rest)!.index;
  /** Whether the host from `start` to the `:` or `/` at `end` (or the end), and what follows it, make a url. */
  const fits = (start: number, end: number): boolean => {
    if (!urlHost(rest.slice(start, end))) return false;
    let at = end;
    if (rest.charCodeAt(at) === COLON) {
      const port = URL_PORT.exec(rest.slice(at, at + 7));
      if (!port) return false;
      at += port[0].length;
    }
    return at === rest.length || (rest.charCodeAt(at) === SLASH && lastSpace < at);
  };
  let start = 0; // where a host may start, or -1
  let lastDot = -1;
  for (let k = 0; k <= rest.length; k++) {
    const c = k < rest.length ? rest.charCodeAt(k) : -1;
    if (c === DOT) lastDot = k;
    if (c !== AT && c !== COLON && c !== SLASH && c !== -1) continue;
    if (start >= 0 && c !== AT && lastDot > start && fits(start, k)) return true;
    // After an `@` that ends user information (at least one character, no white space), a host may start.
    start = c === AT && k > 0 && (firstSpace < 0 || firstSpace > k) ? k + 1 : -1;
  }
  return false;
}

/**
 * `byte` (base64, RFC 4648 section 4, as OpenAPI has it). ajv-formats' expression carries the `m`
 * flag, so one valid line anywhere passed the whole value ("====\nQUJD" and "not base64\n" did).
 * Without it the expression spans the value; it backtracks one group at a time, in linear time.
 */
const BYTE = /^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/u;

export function isByte(value: string): boolean {
  return BYTE.test(value);
}

/** Adds the formats to `ajv`: ajv-formats' own (full mode, with formatMinimum and the like), `url` replaced by isUrl and `byte` by isByte. */
export function addSafeFormats(ajv: Ajv): void {
  addFormats(ajv);
  ajv.addFormat('url', { type: 'string', validate: isUrl });
  ajv.addFormat('byte', { type: 'string', validate: isByte });
}
