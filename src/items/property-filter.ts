/**
 * Property clauses: the `property` filter of `GET /items`, search and bulk actions, written
 * `<path><operator><value>` (`status=open`, `priority>=3`, `address.city!="Paris"`). One parser
 * and one SQL builder, used through the shared item filter (item-filter.ts).
 *
 * - path: property keys joined by dots; a key of digits also indexes an array (`lines.0.sku`).
 * - operator: `=`, `!=`, `<`, `<=`, `>`, `>=`.
 * - value: JSON when it parses as a JSON scalar (`3`, `true`, `null`, `"3"`), else the text as
 *   written (`open`). Equality is JSON's: `"3"` is not `3`.
 *
 * `=null` matches a property that is missing or null; `!=` matches a missing property too (it
 * is not equal). Comparisons take a number or a string and match properties of the same JSON
 * type, strings in code point order (so ISO 8601 times sort as times).
 */
import { textIssue } from '../common/input-policy';
import { validationError } from '../common/validation';

export type PropertyOperator = '=' | '!=' | '<' | '<=' | '>' | '>=';

export interface PropertyClause {
  path: string[];
  op: PropertyOperator;
  /** The value's JSON type. */
  kind: 'string' | 'number' | 'boolean' | 'null';
  /**
   * The value as JSON text, a number as written: PostgreSQL reads it exactly (JavaScript's
   * numbers would round `12345678901234567890`, and make `1e400` Infinity).
   */
  json: string;
}

/** Each clause is tested on every item a listing reads: a bound, as on edge clauses. */
export const MAX_PROPERTY_CLAUSES = 10;
export const MAX_PROPERTY_CLAUSE_LENGTH = 1000;
export const MAX_PATH_KEYS = 8;
/** A key of a path, as a regular expression's source (also the OpenAPI pattern of `sort`). */
export const PATH_KEY_PATTERN = '[A-Za-z0-9_-]{1,100}';
const KEY = new RegExp(`^${PATH_KEY_PATTERN}$`);
// Longest operators first: `>=` is not `>` followed by a value starting with `=`.
const OPERATORS: PropertyOperator[] = ['!=', '<=', '>=', '=', '<', '>'];

export const PROPERTY_CLAUSE_RULE =
  'must look like <path><operator><value>: a path of property keys (letters, digits, _ and -) joined by dots, one of = != < <= > >=, ' +
  'and a JSON scalar or plain text (no NUL, valid Unicode; numbers within 1000 digits and exponents); comparisons take a number or a string';

/** The clause `raw` states, or undefined when it is malformed. */
export function propertyClauseOf(raw: unknown): PropertyClause | undefined {
  if (typeof raw !== 'string' || raw.length > MAX_PROPERTY_CLAUSE_LENGTH) return undefined;
  const at = raw.search(/[!<>=]/);
  if (at < 1) return undefined;
  const op = OPERATORS.find((o) => raw.startsWith(o, at));
  if (!op) return undefined;
  const path = propertyPathOf(raw.slice(0, at));
  if (!path) return undefined;
  const value = scalarOf(raw.slice(at + op.length));
  if (value === undefined) return undefined;
  if (op !== '=' && op !== '!=' && value.kind !== 'number' && value.kind !== 'string') return undefined;
  return { path, op, ...value };
}

/**
 * The keys of a property path (`address.city`), or undefined when it is no path a clause takes:
 * also the path of `GET /items?sort=properties.<path>` (listing-order.ts).
 */
export function propertyPathOf(text: string): string[] | undefined {
  const path = text.split('.');
  return path.length <= MAX_PATH_KEYS && path.every((k) => KEY.test(k)) ? path : undefined;
}

/**
 * Most decimal digits, and the largest exponent, of a number a clause takes: far inside what
 * PostgreSQL's numeric holds (131,072 digits before the point, 16,383 after), which refuses
 * `1e1000000` or `1e-100000` with an error that is no answer to the caller.
 */
const MAX_NUMBER_DIGITS = 1000;
const MAX_NUMBER_EXPONENT = 1000;

/** JSON's scalars as JSON, any other text as a string; an object or array is no scalar, nor what PostgreSQL could not read. */
function scalarOf(text: string): Pick<PropertyClause, 'kind' | 'json'> | undefined {
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    return textIssue(text) ? undefined : { kind: 'string', json: JSON.stringify(text) };
  }
  if (parsed === null) return { kind: 'null', json: 'null' };
  if (typeof parsed === 'number') return readableNumber(text.trim()) ? { kind: 'number', json: text.trim() } : undefined;
  // A JSON escape can spell what a query parameter may not carry (`"\u0000"`, half a surrogate pair).
  if (typeof parsed === 'string') return textIssue(parsed) ? undefined : { kind: 'string', json: JSON.stringify(parsed) };
  if (typeof parsed === 'boolean') return { kind: 'boolean', json: JSON.stringify(parsed) };
  return undefined;
}

/** A JSON number's text within MAX_NUMBER_DIGITS digits and MAX_NUMBER_EXPONENT of exponent. */
export function readableNumber(json: string): boolean {
  const [mantissa, exponent = '0'] = json.toLowerCase().split('e');
  return mantissa.replace(/[^0-9]/g, '').length <= MAX_NUMBER_DIGITS && Math.abs(Number(exponent)) <= MAX_NUMBER_EXPONENT;
}

export const isPropertyClause = (v: unknown): boolean => propertyClauseOf(v) !== undefined;

export function parsePropertyClauses(field: string, raw: string | string[] | undefined): PropertyClause[] {
  if (raw === undefined) return [];
  const values = Array.isArray(raw) ? raw : [raw];
  if (values.length > MAX_PROPERTY_CLAUSES) throw validationError([{ field, message: `takes at most ${MAX_PROPERTY_CLAUSES} clauses` }]);
  return values.map((v) => {
    const clause = propertyClauseOf(v);
    if (!clause) throw validationError([{ field, message: PROPERTY_CLAUSE_RULE }]);
    return clause;
  });
}

const SQL_OPERATORS: Record<Exclude<PropertyOperator, '=' | '!='>, string> = { '<': '<', '<=': '<=', '>': '>', '>=': '>=' };

/** The SQL condition of one clause on `<alias>.properties`; `p` binds a parameter. */
export function propertyConditionSql(c: PropertyClause, alias: string, p: (v: unknown) => string): string {
  const at = `${alias}.properties #> ${p(c.path)}::text[]`;
  if (c.kind === 'null') return c.op === '=' ? `coalesce(${at}, 'null') = 'null'::jsonb` : `coalesce(${at}, 'null') <> 'null'::jsonb`;
  const json = `${p(c.json)}::jsonb`;
  if (c.op === '=') return `${at} = ${json}`;
  if (c.op === '!=') return `${at} IS DISTINCT FROM ${json}`;
  const sqlOp = SQL_OPERATORS[c.op];
  // The CASE keeps the cast from ever seeing another JSON type, whatever order PostgreSQL tests in.
  if (c.kind === 'number') return `(CASE WHEN jsonb_typeof(${at}) = 'number' THEN (${at})::numeric ${sqlOp} (${json})::numeric ELSE false END)`;
  return `(CASE WHEN jsonb_typeof(${at}) = 'string' THEN (${at} #>> '{}') COLLATE "C" ${sqlOp} (${json} #>> '{}') COLLATE "C" ELSE false END)`;
}
