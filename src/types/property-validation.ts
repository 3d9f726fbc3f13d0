/**
 * Checking item properties against a type's resolved schema (validatorFor): in this thread, or,
 * when the check could take long (long text under patterns, many values under many schemas), off
 * the event loop in pattern-check.ts's worker; the first error only past MAX_VALUES_LISTED values.
 */
import { ErrorObject } from 'ajv';
import { ApiError } from '../common/api-error';
import { compiledFor, fullFor, loadOf } from './compiled-validators';
import { cannotCheck, patternChecker } from './pattern-check';
import type { JsonSchema } from './type-schema';

/**
 * Properties holding more values than this get their first error only (the pass that finds it
 * stops there): listing every one, where many schemas apply to each element of a large array,
 * took gigabytes (an error per failed anyOf branch per element).
 */
const MAX_VALUES_LISTED = 1000;

/**
 * Runs one pass of a type's validator: its errors, or undefined when the properties fit. Only
 * `true` is valid: an `$async` schema stored before it was refused answers a Promise (whose
 * rejection must not go unhandled: that ended the process). An engine that aborted mid-check is
 * replaced and the check run once more.
 */
function run(cacheKey: string, schema: JsonSchema, pass: 'quick' | 'full', properties: unknown): ErrorObject[] | undefined {
  for (let attempt = 1; ; attempt++) {
    const entry = compiledFor(cacheKey, schema);
    let result: unknown;
    try {
      const validate = pass === 'quick' ? entry.quick : fullFor(cacheKey, schema, entry);
      result = validate(properties);
      if (result === true) return undefined;
      if (result === false) return validate.errors?.length ? [...validate.errors] : [{ keyword: 'false', instancePath: '', schemaPath: '#', params: {}, message: 'is invalid' }];
    } catch (err) {
      if (err instanceof ApiError) throw err;
      if (entry.engine.broken && attempt === 1) continue;
      throw cannotCheck(entry.engine.broken ? 'its regular expressions ran out of memory' : (err as Error).message);
    }
    if (typeof (result as PromiseLike<unknown> | undefined)?.then === 'function') (result as Promise<unknown>).then(undefined, () => undefined);
    throw cannotCheck('it does not answer synchronously ($async)');
  }
}

/** Whether `value` holds more than `limit` values (objects, arrays and scalars, itself included). */
function moreValuesThan(value: unknown, limit: number): boolean {
  let left = limit;
  const count = (v: unknown): boolean => {
    if (--left < 0) return true;
    if (v !== null && typeof v === 'object') for (const child of Object.values(v)) if (count(child)) return true;
    return false;
  };
  return count(value);
}

/**
 * Checks item properties against a type's resolved schema: the problems found ([] when they
 * fit). Rejects with 400 invalid_schema (an ApiError) when the schema cannot check them.
 */
export type PropertiesValidator = (properties: Record<string, unknown>) => Promise<ErrorObject[]>;

/**
 * Above this many (regexCost + 1) × characters of text, properties are checked off the event
 * loop (pattern-check.ts): at the slowest rate measured, some 160 ns per unit and byte of
 * UTF-8, that many take about 30 ms. The regexCost is the most that can apply to one value
 * (`Load.regexWeight`: a pattern as many times as it applies), so it bounds every character's
 * share. Most items of most types stay under it, and types without patterns never pay for the count.
 */
const IN_PROCESS_MATCH_UNITS = 100_000;

/**
 * Above this many values × `costPerValue`, properties are checked off the event loop too: at
 * most some 15-35 ms in this thread. 241 schemas with `multipleOf` applying to each of 250,000
 * values cost 2.2 s (measured 2026-11-27), which one tenant's writes could spend of every
 * tenant's event loop; in the worker such a check runs into its time limit instead (400
 * `invalid_schema`). A type of a few schemas a value keeps bodies of over 100,000 values here.
 */
const IN_PROCESS_VALUE_UNITS = 400_000;

/**
 * A type's validator; `cacheKey` must change whenever the schema does. Compiled on first use.
 * `owner` (the type's tenant) is whose turn a check in the worker takes (pattern-check.ts).
 */
export function validatorFor(cacheKey: string, schema: JsonSchema, owner = cacheKey): PropertiesValidator {
  return async (properties) => {
    const weight = loadOf(cacheKey, schema).regexWeight;
    const inProcess = weight === 0 ? Infinity : Math.floor(IN_PROCESS_MATCH_UNITS / (weight + 1));
    const costly =
      (inProcess !== Infinity && textLonger(properties, inProcess)) ||
      moreValuesThan(properties, Math.floor(IN_PROCESS_VALUE_UNITS / compiledFor(cacheKey, schema).valueCost));
    return costly ? patternChecker.check(owner, cacheKey, schema, properties) : checkProperties(cacheKey, schema, properties);
  };
}

/** validatorFor's check, in this thread (pattern-check.worker.ts runs it in the worker). */
export function checkProperties(cacheKey: string, schema: JsonSchema, properties: unknown): ErrorObject[] {
  const first = run(cacheKey, schema, 'quick', properties);
  if (!first) return [];
  if (moreValuesThan(properties, MAX_VALUES_LISTED)) return first;
  return run(cacheKey, schema, 'full', properties) ?? first;
}

/** Whether the strings of `value` (object keys included, which patternProperties match) are more than `limit` characters. */
function textLonger(value: unknown, limit: number): boolean {
  let left = limit;
  const count = (v: unknown): boolean => {
    if (typeof v === 'string') return (left -= v.length) < 0;
    if (v === null || typeof v !== 'object') return false;
    if (Array.isArray(v)) return v.some(count);
    for (const [key, child] of Object.entries(v)) if ((left -= key.length) < 0 || count(child)) return true;
    return false;
  };
  return count(value);
}
