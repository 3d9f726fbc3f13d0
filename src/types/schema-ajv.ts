/**
 * The ajv every check of a type's schema and every validator of its items is built on (how it
 * is configured, once), the draft-07 meta-schema check, and the 400 invalid_schema those checks
 * answer.
 */
import Ajv, { Options } from 'ajv';
import { ApiError } from '../common/api-error';
import { addSafeFormats } from './formats';
import type { JsonSchema } from './type-schema';

export function newAjv(options: Options): Ajv {
  // Not strict: tenant schemas may carry keywords ajv does not know (they are ignored), and
  // stored ones formats it does not know (unknownFormats refuses new ones); and no logger, so
  // ajv's warnings about them do not reach the console past LOG_LEVEL.
  // multipleOf within 1e-12 of a whole quotient: 0.07 / 0.01 is 7.000000000000001 in binary
  // floating point, and a money field of `multipleOf: 0.01` refused one amount in six.
  // Own properties only: otherwise `required: ["toString"]` held for every item, and an item
  // without a declared `constructor` property was refused for Object's function in its place.
  const ajv = new Ajv({ strict: false, logger: false, multipleOfPrecision: 12, ownProperties: true, ...options });
  // ajv-formats' formats, each linear in the value's length (formats.ts: not its own `url`).
  addSafeFormats(ajv);
  // Our own annotations inside a property schema.
  ajv.addKeyword({ keyword: 'searchable', schemaType: 'boolean' });
  return ajv;
}

/** Checks schemas against the draft-07 meta-schema; it never compiles, nor keeps, a tenant's schema. */
export const meta = newAjv({ allErrors: true, addUsedSchema: false });

/** 400 invalid_schema listing `problems` (JSON pointers into the schema), first one in the message. */
export function refuse(problems: Array<{ path: string; message: string }>): never {
  const [first] = problems;
  const more = problems.length > 1 ? ` (and ${problems.length - 1} more in details.errors)` : '';
  throw ApiError.badRequest('invalid_schema', `schema ${first.path}: ${first.message}${more}`, { errors: problems });
}

/** The draft-07 meta-schema's complaints about `schema`, as refuse() lists them; empty when it conforms. */
export function metaSchemaProblems(schema: JsonSchema): Array<{ path: string; message: string }> {
  if (meta.validateSchema(schema)) return [];
  return (meta.errors ?? []).map((e) => ({ path: e.instancePath || '/', message: e.message ?? 'is invalid' }));
}
