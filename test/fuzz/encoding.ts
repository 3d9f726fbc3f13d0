/**
 * Byte-exact encodings the fuzzer needs and the standard library will not produce:
 * JSON text with fragments no JS value can express (nesting deeper than the stack, 1e400,
 * -0, 20-digit integers, duplicate keys), percent-encoding of strings that are not valid
 * Unicode (a lone surrogate becomes the bytes ED A0 80, as WTF-8 would write it, where
 * encodeURIComponent throws), and the strict decoding the oracles use to see what a request
 * really contained.
 */

/** A fragment of JSON text that is spliced into a body verbatim. */
export class RawJson {
  constructor(
    readonly text: () => string,
    readonly label: string,
  ) {}
  toJSON(): string {
    return `<raw ${this.label}>`;
  }
}

/** Nesting built as text: a JS value this deep would overflow JSON.stringify's recursion. */
export function deepJson(depth: number, shape: 'array' | 'object' | 'mixed'): RawJson {
  return new RawJson(() => {
    if (shape === 'array') return '['.repeat(depth) + ']'.repeat(depth);
    if (shape === 'object') return '{"a":'.repeat(depth) + '1' + '}'.repeat(depth);
    const open: string[] = [];
    const close: string[] = [];
    for (let i = 0; i < depth; i++) {
      open.push(i % 2 ? '[' : '{"k":');
      close.push(i % 2 ? ']' : '}');
    }
    return open.join('') + 'null' + close.reverse().join('');
  }, `${shape} nesting ${depth} deep`);
}

export const rawNumber = (text: string) => new RawJson(() => text, `number ${text}`);

/**
 * JSON.stringify with RawJson splices. JSON.stringify itself already escapes lone surrogates
 * (`"\ud800"`), so a JSON body carries them as escapes the server's JSON.parse turns back into
 * lone surrogates: exactly the hostile value we want to deliver.
 */
export function toJsonText(value: unknown): string {
  if (value instanceof RawJson) return value.text();
  if (value === undefined) return 'null';
  if (value === null || typeof value !== 'object') return JSON.stringify(value) ?? 'null';
  if (Array.isArray(value)) return `[${value.map(toJsonText).join(',')}]`;
  const parts: string[] = [];
  for (const key of Object.keys(value)) {
    const v = (value as Record<string, unknown>)[key];
    if (v === undefined) continue;
    parts.push(`${JSON.stringify(key)}:${toJsonText(v)}`);
  }
  return `{${parts.join(',')}}`;
}

/** UTF-8 bytes of a string, but a lone surrogate is written as its 3-byte WTF-8 form. */
export function wtf8(s: string): Buffer {
  const bytes: number[] = [];
  for (let i = 0; i < s.length; i++) {
    let cp = s.charCodeAt(i);
    if (cp >= 0xd800 && cp <= 0xdbff && i + 1 < s.length) {
      const lo = s.charCodeAt(i + 1);
      if (lo >= 0xdc00 && lo <= 0xdfff) {
        cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
        i++;
      }
    }
    if (cp < 0x80) bytes.push(cp);
    else if (cp < 0x800) bytes.push(0xc0 | (cp >> 6), 0x80 | (cp & 63));
    else if (cp < 0x10000) bytes.push(0xe0 | (cp >> 12), 0x80 | ((cp >> 6) & 63), 0x80 | (cp & 63));
    else bytes.push(0xf0 | (cp >> 18), 0x80 | ((cp >> 12) & 63), 0x80 | ((cp >> 6) & 63), 0x80 | (cp & 63));
  }
  return Buffer.from(bytes);
}

const UNRESERVED = /[A-Za-z0-9\-._~]/;

/**
 * Percent-encodes every byte outside the unreserved set (so the request line is always
 * printable ASCII, which node's client and curl both pass through untouched).
 */
export function pct(s: string): string {
  let out = '';
  for (const b of wtf8(s)) {
    const c = String.fromCharCode(b);
    out += b < 0x80 && UNRESERVED.test(c) ? c : `%${b.toString(16).toUpperCase().padStart(2, '0')}`;
  }
  return out;
}

/** True when the string holds a UTF-16 surrogate without its partner. */
export function hasLoneSurrogate(s: string): boolean {
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c >= 0xd800 && c <= 0xdbff) {
      const n = s.charCodeAt(i + 1);
      if (n >= 0xdc00 && n <= 0xdfff) i++;
      else return true;
    } else if (c >= 0xdc00 && c <= 0xdfff) return true;
  }
  return false;
}

export type Decoded = { ok: true; text: string } | { ok: false; reason: 'bad-percent' | 'invalid-utf8' };

/** Strict percent-decoding (what a careful server would accept): no stray `%`, valid UTF-8 only. */
export function strictDecode(s: string, plusIsSpace = false): Decoded {
  const bytes: number[] = [];
  for (let i = 0; i < s.length; i++) {
    const c = s[i];
    if (c === '%') {
      const hex = s.slice(i + 1, i + 3);
      if (!/^[0-9A-Fa-f]{2}$/.test(hex)) return { ok: false, reason: 'bad-percent' };
      bytes.push(parseInt(hex, 16));
      i += 2;
    } else if (c === '+' && plusIsSpace) bytes.push(0x20);
    else bytes.push(...Buffer.from(c, 'utf8'));
  }
  try {
    // ignoreBOM keeps a leading U+FEFF as the server reads it (fuzz seed 2050: `%EF%BB%BF` read as "").
    return { ok: true, text: new TextDecoder('utf-8', { fatal: true, ignoreBOM: true }).decode(Buffer.from(bytes)) };
  } catch {
    // WTF-8 surrogates land here too: they are not UTF-8.
    return { ok: false, reason: 'invalid-utf8' };
  }
}

/** Splits a raw query string into raw (still encoded) name/value pairs. */
export function splitQuery(query: string): Array<[string, string | undefined]> {
  if (query === '') return [];
  return query.split('&').map((part) => {
    const eq = part.indexOf('=');
    return eq < 0 ? [part, undefined] : [part.slice(0, eq), part.slice(eq + 1)];
  });
}
