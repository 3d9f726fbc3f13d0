/**
 * Compiling a type's resolved schema into validators, each in an ajv of its own whose patterns
 * run on RE2 (regex-engine.ts), and the cache that keeps them by cache key, bounded by their
 * estimated bytes, for all tenants of this thread.
 */
import { ValidateFunction } from 'ajv';
import { WeighedMap } from '../common/weighed-map';
import { RegexEngine } from './regex-engine';
import { assertWithinLimits, Load } from './schema-limits';
import { eachSchema, ownRegexes } from './schema-walk';
import { metaSchemaProblems, newAjv, refuse } from './schema-ajv';
import type { JsonSchema } from './type-schema';

const re2Code = 'require("re2-wasm").RE2';
let engine: RegexEngine | undefined;

/**
 * A type's validators: `quick` stops at the first error, `full` (made when needed) lists them
 * all. `valueCost`: what checking one value of the properties costs, at most (`costPerValue`).
 * `bytes`: what one of them holds, estimated when `quick` is compiled (validatorBytes).
 */
interface Compiled {
  engine: RegexEngine;
  quick: ValidateFunction;
  full?: ValidateFunction;
  valueCost: number;
  bytes: number;
}

/**
 * The cost of checking one value, in units of one schema applied to it (1.4 ns for `minimum`
 * alone, 36 ns with `multipleOf`, measured in plain node): the schemas that may apply to it,
 * plus their enum values, which ajv compares one after another (2.7 ns each for numbers).
 */
const costPerValue = (load: Load): number => load.schemas + Math.ceil(load.values / 32);

/**
 * What is kept of a schema by cache key: its Load (assertWithinLimits, once per key) and its
 * validators once compiled (their estimated bytes: `cachedBytes`).
 */
interface Cached {
  load: Load;
  validators?: Compiled;
}

/**
 * What the cache may hold, by the estimates below, in each thread that validates (the main one
 * and pattern-check.ts's worker, whose cache is its own): with both validators compiled, some
 * 3,400 types of ten string properties, 66 of 40 KB, or 20 at the 128 KiB a resolved schema may
 * reach. A type pushed out is compiled again at its next write (milliseconds for most schemas,
 * half a second at 128 KiB). A bound on the count alone let 5,000 large schemas hold gigabytes,
 * under keys that may never come back (a deleted type's, a changed type's old version).
 */
const CACHE_BYTES = 256 * 1024 * 1024;
const MAX_CACHED = 5000;

/**
 * What one compiled validator holds, from its schema's JSON size: ajv writes code some 15 times
 * that size, and V8 keeps it as source and bytecode with the ajv behind it. Measured (heap after
 * gc, 2026-11-27): a 38 KB schema of 700 flat properties, 1.7 MB a validator (45 per byte); ten
 * string properties in 471 bytes, 40 KB; four 256-value enums in 15 KB, 51 KB; 27 KB mostly of
 * descriptions, 81 KB. So the shapes that make code overestimate the others, which are only
 * compiled again sooner.
 */
const VALIDATOR_BASE_BYTES = 16 * 1024;
const VALIDATOR_BYTES_PER_SCHEMA_BYTE = 48;
const validatorBytes = (schema: JsonSchema): number => VALIDATOR_BASE_BYTES + VALIDATOR_BYTES_PER_SCHEMA_BYTE * JSON.stringify(schema).length;
/** A cache key, its Load and the map's entry. */
const loadBytes = (cacheKey: string): number => 256 + 2 * cacheKey.length;

/**
 * By cache key, least recently used first; every validator in it is from the current engine. It
 * is all tenants' (the cache key begins with the tenant): one tenant's many or large types push
 * out others' least recently used ones, which are compiled again at their next write.
 */
const cache = new WeighedMap<string, Cached>(MAX_CACHED, CACHE_BYTES);

/** What an entry holds, by estimate: its key and Load, and its validators (the full one counted again once compiled). */
const cachedBytes = (cacheKey: string, entry: Cached): number =>
  loadBytes(cacheKey) + (entry.validators ? entry.validators.bytes * (entry.validators.full ? 2 : 1) : 0);

/** The schema's cache entry, now the most recently used, checking it against the limits once per cache key. */
function cachedFor(cacheKey: string, schema: JsonSchema): Cached {
  let entry = cache.touch(cacheKey);
  if (!entry) {
    // Types stored before a limit existed meet it here, and their writes get its 400.
    entry = { load: assertWithinLimits(schema, false) };
    cache.set(cacheKey, entry, cachedBytes(cacheKey, entry));
  }
  return entry;
}

/** The schema's Load (what applies to one value at most: assertWithinLimits). */
export const loadOf = (cacheKey: string, schema: JsonSchema): Load => cachedFor(cacheKey, schema).load;

/** Sets the validators of a cache entry and weighs it again, if the entry is still cached. */
function keep(cacheKey: string, entry: Cached, validators: Compiled | undefined): void {
  entry.validators = validators;
  if (cache.get(cacheKey) === entry) cache.reweigh(cacheKey, cachedBytes(cacheKey, entry));
}

/**
 * What each cache key of a type's validators begins with (the rest changes with its schema), so
 * that forgetValidators drops them all.
 */
export const validatorPrefix = (tenantId: string, name: string) => `${tenantId}:${name}:`;

/**
 * Drops what is cached under keys starting with `prefix` (a type's `tenant:name:`), when the
 * type is deleted or changed: those keys never come back, and would wait to be pushed out. A
 * write still holding the old schema compiles it again; only this thread's cache is told.
 */
export function forgetValidators(prefix: string): void {
  for (const [key] of cache) if (key.startsWith(prefix)) cache.delete(key);
}

/** What the cache holds under keys starting with `prefix` (all of it by default): entries and estimated bytes. */
export function validatorCacheUse(prefix = ''): { entries: number; bytes: number } {
  if (!prefix) return { entries: cache.size, bytes: cache.bytes };
  let entries = 0;
  let bytes = 0;
  for (const [key, entry] of cache) {
    if (!key.startsWith(prefix)) continue;
    entries++;
    bytes += cachedBytes(key, entry);
  }
  return { entries, bytes };
}

/** Sets the cache's budget in estimated bytes (tests); answers the one it replaces. */
export function setValidatorCacheBudget(bytes: number): number {
  const was = cache.maxBytes;
  cache.maxBytes = bytes;
  cache.evict();
  return was;
}

/**
 * The engine new validators are compiled in. A spent one is dropped with every validator it
 * made: its heap goes only with the last of them (regex-engine.ts); Loads stay.
 */
function currentEngine(): RegexEngine {
  if (!engine || engine.spent) {
    engine = new RegexEngine();
    for (const [key, entry] of cache) if (entry.validators) keep(key, entry, undefined);
  }
  return engine;
}

/**
 * Compiles `schema` in an ajv of its own, whose patterns run on engine `e`. What ajv registers
 * while compiling (the schema itself, by which `"$ref": "#"` resolves; an `$id` an older type
 * carries) is that ajv's alone: one ajv for all let a tenant's `$ref` reach another tenant's
 * schema by its `$id`, and a second compile of an `$id` fail ("already exists").
 */
function compileIn(e: RegexEngine, schema: JsonSchema, allErrors: boolean): ValidateFunction {
  const regExp = Object.assign((pattern: string, flags: string) => e.regExp(pattern, flags), { code: re2Code });
  // Not optimised: that pass takes time superlinear in the code (a 250 KB schema compiled in 2.6 s
  // without it, 13.7 s with it), for validators some 30% faster.
  return newAjv({ allErrors, validateSchema: false, code: { regExp, optimize: false } }).compile(schema);
}

/** compileIn the current engine; one whose heap ran out is replaced and the compile tried again. */
function compile(schema: JsonSchema, allErrors: boolean): { engine: RegexEngine; validate: ValidateFunction } {
  for (let attempt = 1; ; attempt++) {
    const e = currentEngine();
    try {
      return { engine: e, validate: compileIn(e, schema, allErrors) };
    } catch (err) {
      if (e.broken && attempt === 1) continue;
      if (e.broken) refuse([{ path: '/', message: 'its regular expressions need more memory than one schema may use; simplify them' }]);
      refuse([{ path: refusedRegexAt(e, schema) ?? '/', message: `cannot be compiled: ${(err as Error).message}` }]);
    }
  }
}

/**
 * Where in `schema` stands a regular expression engine `e` refuses (a lookaround, a
 * backreference): ajv's compile error names the pattern, not its place. Asked only after a
 * failed compile; what `e` compiled or refused already it answers from its cache.
 */
function refusedRegexAt(e: RegexEngine, schema: JsonSchema): string | undefined {
  let found: string | undefined;
  eachSchema(schema, (s, at) => {
    if (found !== undefined || typeof s === 'boolean') return;
    for (const [source, pointer] of ownRegexes(s, at)) {
      try {
        e.regExp(source, 'u');
      } catch {
        found ??= pointer;
      }
    }
  });
  return found;
}

/**
 * Checks that items can be validated against a resolved schema: the limits (schema-limits.ts),
 * the meta-schema, and a compile. 400 invalid_schema when not.
 */
export function assertUsableSchema(schema: JsonSchema): void {
  assertWithinLimits(schema, true);
  const problems = metaSchemaProblems(schema);
  if (problems.length) refuse(problems);
  compile(schema, true);
}

/**
 * Told when a validator compile starts and ends: the pattern-check worker tells its thread, whose
 * time limit is for checking, not for compiling (bounded by the schema limits, and slow on a
 * loaded machine: a schema of nine `\p{L}` patterns took over a second under load).
 */
let compileListener: ((phase: 'start' | 'end') => void) | undefined;
export function onCompile(listener: typeof compileListener): void {
  compileListener = listener;
}

function compiling<T>(work: () => T): T {
  compileListener?.('start');
  try {
    return work();
  } finally {
    compileListener?.('end');
  }
}

export function compiledFor(cacheKey: string, schema: JsonSchema): Compiled {
  const e = currentEngine();
  const entry = cachedFor(cacheKey, schema);
  if (entry.validators?.engine === e) return entry.validators;
  const { engine: made, validate } = compiling(() => compile(schema, false));
  const validators: Compiled = { engine: made, quick: validate, valueCost: costPerValue(entry.load), bytes: validatorBytes(schema) };
  keep(cacheKey, entry, validators);
  return validators;
}

/** The validator listing every error, compiled when first needed in the engine of `quick`. */
export function fullFor(cacheKey: string, schema: JsonSchema, validators: Compiled): ValidateFunction {
  if (validators.full) return validators.full;
  validators.full = compiling(() => compileIn(validators.engine, schema, true));
  const entry = cache.get(cacheKey);
  if (entry?.validators === validators) keep(cacheKey, entry, validators);
  return validators.full;
}
