/**
 * How a JSON answer becomes its body bytes: exactly the bytes JSON.stringify gives, but a large
 * answer (a page of big items, a search page) is built as a Buffer, one element of its lists at
 * a time. app.factory.ts installs it as Fastify's reply serializer.
 *
 * Why: JSON.stringify of a 1.3 MB page returns a rope of parts that Fastify then walks twice as
 * one huge string, to flatten it for Content-Length and to encode it to UTF-8 on the socket;
 * one non-ASCII character anywhere (an ellipsis in a search snippet) makes that whole string
 * two-byte, 2.6 MB in large-object space. Flattening, encoding and the major collections those
 * large strings bring cost several times the stringification itself on every page. Small
 * per-element strings die young, and the one large allocation is a Buffer outside the heap.
 */

/** Below this many characters an answer stays one string: building a Buffer would not pay. */
export const BUFFERED_FROM_CHARS = 64 * 1024;

/**
 * Only an answer holding a list this long is split at all: splitting costs a few microseconds
 * even when the parts end up joined, and an answer that is one item (the write path's) rarely
 * reaches BUFFERED_FROM_CHARS. A large answer without such a list is JSON.stringify'd whole.
 */
export const SPLIT_FROM_ELEMENTS = 8;

/** The value is, or has at its top level, an array of at least SPLIT_FROM_ELEMENTS elements. */
function holdsLongList(value: object): boolean {
  if (Array.isArray(value)) return value.length >= SPLIT_FROM_ELEMENTS;
  for (const key in value) {
    const child: unknown = (value as Record<string, unknown>)[key];
    if (Array.isArray(child) && child.length >= SPLIT_FROM_ELEMENTS) return true;
  }
  return false;
}

/**
 * A value JSON.stringify serialises member by member, so that its parts can be serialised one
 * by one: an array or a plain object (class instances included), without toJSON. A boxed
 * primitive, a toJSON or any other exotic top level is left to JSON.stringify whole.
 */
function splittable(value: unknown): value is object {
  if (typeof value !== 'object' || value === null || typeof (value as { toJSON?: unknown }).toJSON === 'function') return false;
  return Array.isArray(value) || Object.prototype.toString.call(value) === '[object Object]';
}

/**
 * A member that serialises alike on its own: toJSON is called with the key or index that
 * reaches its value, and only a Date's is known to ignore it.
 */
function keyFree(value: unknown): boolean {
  if (typeof value !== 'object' || value === null) return true;
  const toJSON = (value as { toJSON?: unknown }).toJSON;
  return typeof toJSON !== 'function' || toJSON === Date.prototype.toJSON;
}

/**
 * Appends the JSON text of `value` in parts whose concatenation is JSON.stringify(value): each
 * member of the top level, and each element of an array there, is serialised separately.
 * False when a part could serialise differently on its own (a toJSON that may read its key):
 * the caller then stringifies the whole.
 */
function jsonParts(value: unknown, depth: number, parts: string[]): boolean {
  if (Array.isArray(value)) {
    parts.push('[');
    for (let i = 0; i < value.length; i++) {
      if (i > 0) parts.push(',');
      const element: unknown = value[i];
      if (!keyFree(element)) return false;
      // An element JSON.stringify skips (undefined, a function, a symbol) is null in an array.
      parts.push(JSON.stringify(element) ?? 'null');
    }
    parts.push(']');
    return true;
  }
  parts.push('{');
  let first = true;
  for (const key of Object.keys(value as object)) {
    const child: unknown = (value as Record<string, unknown>)[key];
    if (!keyFree(child)) return false;
    if (depth === 0 && Array.isArray(child)) {
      parts.push(first ? '' : ',', JSON.stringify(key), ':');
      if (!jsonParts(child, depth + 1, parts)) return false;
    } else {
      // A member JSON.stringify skips (undefined, a function, a symbol) is left out.
      const text = JSON.stringify(child);
      if (text === undefined) continue;
      parts.push(first ? '' : ',', JSON.stringify(key), ':', text);
    }
    first = false;
  }
  parts.push('}');
  return true;
}

/** The body of a JSON answer: JSON.stringify(value), as a UTF-8 Buffer when it is large. */
export function serializeJson(value: unknown): string | Buffer {
  const parts: string[] = [];
  if (!splittable(value) || !holdsLongList(value) || !jsonParts(value, 0, parts)) return JSON.stringify(value);
  let chars = 0;
  for (const part of parts) chars += part.length;
  if (chars < BUFFERED_FROM_CHARS) return parts.join('');
  const bytes = parts.map((part) => Buffer.byteLength(part));
  const body = Buffer.allocUnsafe(bytes.reduce((a, b) => a + b, 0));
  let offset = 0;
  for (let i = 0; i < parts.length; i++) {
    // As many bytes as characters: all ASCII, which latin1 copies as they are.
    if (bytes[i] === parts[i].length) body.write(parts[i], offset, 'latin1');
    else body.write(parts[i], offset, 'utf8');
    offset += bytes[i];
  }
  return body;
}
