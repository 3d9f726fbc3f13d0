/**
 * The input policy: what text and structure the service accepts at all, whatever the route.
 * Applied where input enters (body parsing, InputGuard for query and path), never per route.
 *
 * - NUL (U+0000) and unpaired UTF-16 surrogates are refused, in values and in object keys.
 *   PostgreSQL's `text` and `jsonb` cannot hold either, and quietly stripping or replacing them
 *   would make what a client reads back differ from what it wrote (a hash or signature over
 *   the value would no longer match), so the honest answer is a 400 naming the field.
 * - JSON bodies nest at most MAX_JSON_DEPTH levels: every later step (validation, jsonb
 *   encoding, JSON.stringify) recurses, and a few thousand levels overflow the stack.
 * - The keys `__proto__`, `constructor`, `prototype` and every other member name of
 *   Object.prototype (`toString`, `valueOf`, …) are refused at any depth: the transformation
 *   and validation libraries treat those names as their own (class-transformer silently drops
 *   such a key, even deep inside `properties`), so such a field would be lost or pass unchecked
 *   rather than be stored or refused.
 */
import { FieldIssue, hasCharLength, MAX_FIELD_ISSUES } from './validation';

export const MAX_JSON_DEPTH = 64;


export function textIssue(text: string): string | undefined {
  if (text.includes('\u0000')) return 'must not contain the NUL character (U+0000)';
  if (!text.isWellFormed()) return 'must be valid Unicode (it contains an unpaired UTF-16 surrogate)';
  return undefined;
}

/** At most `max` UTF-16 units of a text from outside (an upstream's error, a receiver's), not ending in half a surrogate pair. */
export function cutText(text: string, max: number): string {
  return text.length <= max ? text : text.slice(0, max).replace(/[\uD800-\uDBFF]$/, '');
}

/**
 * At most `max` characters of a text, counted as the length limits count them (codePointLength):
 * text the service makes into a field of its own (a key label) fits what the API takes. The first
 * 2 × `max` UTF-16 units hold `max` characters whole, whatever half pair may end them.
 */
export const cutChars = (text: string, max: number): string => (hasCharLength(text, 0, max) ? text : [...text.slice(0, 2 * max)].slice(0, max).join(''));

/**
 * A request header's value as the client wrote it, to repeat in an error: Node reads a header's
 * bytes as latin1, so UTF-8 text came out as mojibake (`日本` as `æ\u0097¥æ\u009c¬`); bytes that
 * are no UTF-8 become U+FFFD. At most `max` characters.
 */
export const headerText = (value: string, max: number): string => cutText(Buffer.from(value, 'latin1').toString('utf8'), max);

const join = (path: string, key: string | number) => (path ? `${path}.${key}` : String(key));

const RESERVED_KEYS = new Set([...Object.getOwnPropertyNames(Object.prototype), 'prototype']);

const isReservedKey = (key: string) => RESERVED_KEYS.has(key);

export interface InputScan {
  /** Skip the text and reserved-name checks inside this top-level array's elements (checked per element later). */
  perElement?: string;
}

/**
 * The policy's complaints about a parsed JSON value (or a query/params object), with dotted
 * paths (`properties.title`, `items.3.tags.0`); empty when the value is acceptable. Depth is
 * always checked; text and key names are not checked inside `perElement` arrays.
 *
 * On the way it makes each -0 inside the value a 0, the number PostgreSQL stores for it: kept,
 * it would differ from what is stored, and a write sending the same content again (a client
 * writing floats as `-0.0`) would count as a change each time, with a version and an event.
 */
export function inputIssues(value: unknown, path = '', scan: InputScan = {}): FieldIssue[] {
  const issues: FieldIssue[] = [];
  const visit = (v: unknown, at: string, depth: number, checkText: boolean): void => {
    if (issues.length >= MAX_FIELD_ISSUES) return; // a body full of NULs needs examples, not every one
    if (typeof v === 'string') {
      const problem = checkText ? textIssue(v) : undefined;
      if (problem) issues.push({ field: at || '(body)', message: problem });
      return;
    }
    if (typeof v === 'number' && !Number.isFinite(v)) {
      // JSON.parse turns 1e400 into Infinity, which JSON cannot store: it would come back null.
      issues.push({ field: at || '(body)', message: 'is a number too large to represent' });
      return;
    }
    if (v === null || typeof v !== 'object') return;
    if (depth >= MAX_JSON_DEPTH) {
      issues.push({ field: at || '(body)', message: `nests deeper than ${MAX_JSON_DEPTH} levels` });
      return;
    }
    if (Array.isArray(v)) {
      v.forEach((x, i) => (Object.is(x, -0) ? (v[i] = 0) : visit(x, join(at, i), depth + 1, checkText)));
      return;
    }
    for (const [key, x] of Object.entries(v)) {
      if (Object.is(x, -0)) (v as Record<string, unknown>)[key] = 0;
      const text = checkText ? textIssue(key) : undefined;
      // A key that is not valid text is named quoted (JSON-escaped), here and below it.
      const field = join(at, text ? JSON.stringify(key) : key);
      if (text) issues.push({ field, message: `has a key that ${text}` });
      else if (checkText && isReservedKey(key)) issues.push({ field, message: 'is a reserved name, not accepted as a field' });
      if (depth === 0 && key === scan.perElement && Array.isArray(x)) {
        x.forEach((element, i) => visit(element, join(field, i), depth + 2, false));
      } else {
        visit(x, field, depth + 1, checkText);
      }
    }
  };
  visit(value, path, 0, true);
  return issues;
}
