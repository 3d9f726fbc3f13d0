/**
 * Request validation: the global ValidationPipe (whitelisting, 400 `validation_error` listing
 * every bad field) and the reusable decorators the DTOs share.
 */
import { applyDecorators, ArgumentMetadata, PipeTransform, ValidationError, ValidationPipe } from '@nestjs/common';
import { ApiProperty, ApiPropertyOptional } from '@nestjs/swagger';
import { classToPlain, ClassTransformOptions, Exclude, plainToInstance, Transform, TransformationType, Type } from 'class-transformer';
import type { MetadataStorage } from 'class-transformer/types/MetadataStorage';
import type { ValidationMetadata } from 'class-validator/types/metadata/ValidationMetadata';
import { buildMessage, getMetadataStorage, IsDefined, IsString, registerDecorator, ValidateBy, ValidateIf, ValidationOptions } from 'class-validator';
import { ApiError } from './api-error';
import { isDottedName, isPattern } from './type-pattern';

export interface FieldIssue {
  field: string;
  message: string;
}

/** How every refusal of a field nobody reads is worded: a body's, a query string's. */
const UNKNOWN_FIELD = 'is not a known field';

/** How every refusal of a required field that was not sent is worded: a body's, a query string's. */
const MISSING_FIELD = 'is required';

/** How every refusal of a `null` the field does not take is worded (leaving it out is what keeps or defaults it). */
const NULL_FIELD = 'must not be null';

/** class-validator's few defaults in other words than the rest ("should not be empty"), as every other refusal says it. */
const inHouseWords = (message: string) => message.replace(/^should /, 'must ');

/** class-validator's checks of a value's kind: when one fails, the field's other checks say nothing more. */
const KIND_CHECKS = new Set(['isString', 'isInt', 'isNumber', 'isBoolean', 'isArray', 'isObject']);

/** class-validator's errors as field issues, each message as the service words it (UNKNOWN_FIELD). */
export function validationIssues(errors: ValidationError[], parent = ''): FieldIssue[] {
  const out: FieldIssue[] = [];
  for (const e of errors) {
    const field = parent ? `${parent}.${e.property}` : e.property;
    if (e.constraints) {
      // A missing field fails every check on it; saying it is missing says it all, in the same
      // words whatever the checks are (an @IsDefined may say more after them). So does a null
      // the field does not take.
      const missing = e.value === undefined && !e.constraints.whitelistValidation;
      const nulled = e.value === null && !e.constraints.whitelistValidation;
      const constraints = e.constraints.isDefined
        ? { isDefined: e.constraints.isDefined }
        : missing
          ? { isDefined: MISSING_FIELD }
          : nulled
            ? { isDefined: NULL_FIELD }
            : e.constraints;
      // A value of the wrong kind (a string for a number) fails its range checks too; its kind is what to correct.
      const kind = Object.keys(constraints).filter((name) => KIND_CHECKS.has(name));
      const said = kind.length ? Object.fromEntries(kind.map((name) => [name, constraints[name]])) : constraints;
      const messages = Object.entries(said).map(([name, msg]) =>
        name === 'whitelistValidation' ? UNKNOWN_FIELD : inHouseWords(msg.startsWith(e.property + ' ') ? msg.slice(e.property.length + 1) : msg),
      );
      // Two checks that word their refusal alike (a tag list's length and its tags) say it once.
      out.push({ field, message: [...new Set(messages)].join('; ') });
    }
    if (e.children?.length) out.push(...validationIssues(e.children, field));
  }
  return out;
}

/** Most fields a 400 names: a body with thousands of bad keys needs examples, not an echo of itself several times its size. */
export const MAX_FIELD_ISSUES = 20;

export function validationError(fields: FieldIssue[], message = 'The request has invalid fields'): ApiError {
  if (fields.length <= MAX_FIELD_ISSUES) return ApiError.badRequest('validation_error', message, { fields });
  return ApiError.badRequest('validation_error', `${message} (the first ${MAX_FIELD_ISSUES} of ${fields.length} are named)`, { fields: fields.slice(0, MAX_FIELD_ISSUES) });
}

/** The 400 for fields the route does not read. */
export const unknownFieldsError = (fields: string[]): ApiError => validationError(fields.map((field) => ({ field, message: UNKNOWN_FIELD })));

/**
 * The refusal of a JSON body that is not an object, wherever one is caught: JSON of another
 * shape (`3`, `"x"`, `null`: body-parsing.ts), an array (here, or bodyless-routes.ts for a route
 * without a body), or an array sent to a page's JSON route (form-fields.ts).
 */
export const nonObjectBodyError = (): ApiError => validationError([{ field: '(body)', message: 'must be a JSON object' }]);

// class-transformer's registry of @Type/@Transform/@Expose/@Exclude: not exported from its index.
// eslint-disable-next-line @typescript-eslint/no-require-imports
const { defaultMetadataStorage } = require('class-transformer/cjs/storage') as { defaultMetadataStorage: MetadataStorage };

/** Whether class-transformer has something to do with `dto`'s field `key`: a nested class to build, a @Transform, an @Expose or @Exclude. */
function transformsField(dto: new () => unknown, key: string): boolean {
  return (
    defaultMetadataStorage.findTypeMetadata(dto, key) !== undefined ||
    defaultMetadataStorage.findTransformMetadatas(dto, key, TransformationType.PLAIN_TO_CLASS).length > 0 ||
    defaultMetadataStorage.findExposeMetadata(dto, key) !== undefined ||
    defaultMetadataStorage.findExcludeMetadata(dto, key) !== undefined
  );
}

/** The checks class-validator keeps for each of `dto`'s fields, by field, read once per class. */
const fieldChecks = new WeakMap<object, Map<string, ValidationMetadata[]>>();

function checksOf(dto: new () => unknown): Map<string, ValidationMetadata[]> {
  let checks = fieldChecks.get(dto);
  if (!checks) {
    checks = new Map();
    for (const m of getMetadataStorage().getTargetValidationMetadatas(dto, '', true, false)) {
      checks.set(m.propertyName, [...(checks.get(m.propertyName) ?? []), m]);
    }
    fieldChecks.set(dto, checks);
  }
  return checks;
}

/** The ArrayMaxSize of `dto`'s field `key`: undefined when it has none. */
function arrayLimit(dto: new () => unknown, key: string): number | undefined {
  const limits = (checksOf(dto).get(key) ?? []).filter((m) => m.name === 'arrayMaxSize').map((m) => m.constraints[0] as number);
  return limits.length ? Math.min(...limits) : undefined;
}

/**
 * An array longer than its field's ArrayMaxSize: validation refuses it as sent, so nothing is
 * built from its elements first (a 1 MB `items` of 330,000 `{}` held the event loop for seconds
 * before the 400, while class-transformer made an object of each).
 */
const overLong = (dto: new () => unknown, key: string, value: object): boolean =>
  Array.isArray(value) && value.length > (arrayLimit(dto, key) ?? Infinity);

/** The class a field's @Type builds from a plain object, when nothing else in class-transformer touches the field. */
function nestedDto(dto: new () => unknown, key: string, value: object): (new () => object) | undefined {
  if (Array.isArray(value)) return undefined;
  const type = defaultMetadataStorage.findTypeMetadata(dto, key);
  if (!type || type.options?.discriminator || defaultMetadataStorage.findTransformMetadatas(dto, key, TransformationType.PLAIN_TO_CLASS).length > 0) return undefined;
  if (defaultMetadataStorage.findExposeMetadata(dto, key) || defaultMetadataStorage.findExcludeMetadata(dto, key)) return undefined;
  return type.typeFunction() as new () => object;
}

/**
 * class-transformer's plainToInstance, with the objects and arrays of a body that no decorator
 * asks it to build (free-form `properties`, `extensions`, `schema`, and fields the DTO does not
 * declare) handed over as sent. It would rebuild each of them, value by value, to the same plain
 * data, about 2 µs a value: a 1 MB body of 100,000 keys held the event loop for 0.2 s, and before
 * patches/class-transformer+0.5.1.patch, whose key de-duplication took time quadratic in an
 * object's keys, for 12 s. Validation sees the same values; unknown fields are refused by name.
 * An array past its field's ArrayMaxSize is handed over as sent too (overLong), and a nested
 * DTO (@Type) is built here, so that the rule holds at every depth.
 */
export function plainToDto<T extends object>(dto: new () => T, plain: unknown, options?: ClassTransformOptions): T {
  if (plain === null || typeof plain !== 'object' || Array.isArray(plain)) return plainToInstance(dto, plain, options) as T;
  const shallow: Record<string, unknown> = {};
  const asSent: Array<[string, unknown]> = [];
  const nested: Array<[string, new () => object, object]> = [];
  for (const [key, value] of Object.entries(plain)) {
    if (value === null || typeof value !== 'object') shallow[key] = value;
    else if (!transformsField(dto, key) || overLong(dto, key, value)) asSent.push([key, value]);
    else {
      const inner = nestedDto(dto, key, value);
      if (inner) nested.push([key, inner, value]);
      else shallow[key] = value;
    }
  }
  const instance = plainToInstance(dto, shallow, options) as T;
  for (const [key, value] of asSent) (instance as Record<string, unknown>)[key] = value;
  for (const [key, inner, value] of nested) (instance as Record<string, unknown>)[key] = plainToDto(inner, value, options);
  return instance;
}

/**
 * Every request body is an object, and a JSON array is refused as such, as `3` or `"x"` are
 * (body-parsing.ts): body-parser takes arrays, and class-validator would report an array's
 * indexes as unknown fields, or worse.
 */
class ObjectBodyValidationPipe extends ValidationPipe {
  override async transform(value: unknown, metadata: ArgumentMetadata): Promise<unknown> {
    // Path parameters reach each route's own pipe (ParseIdPipe, ParseIntParam, …) as sent: turned
    // into a number here first, `01e2` would read as 100 and ` 5` as 5.
    if (metadata.type === 'param') return value;
    if (metadata.type === 'body' && Array.isArray(value) && this.toValidate(metadata)) throw nonObjectBodyError();
    // A query string, or one a custom decorator hands over to be validated (an upstream's redirect).
    const query = metadata.type === 'query' || (metadata.type === 'custom' && this.toValidate(metadata));
    if (query && value !== null && typeof value === 'object' && typeof metadata.metatype === 'function') {
      const repeated = repeatedParameters(metadata.metatype as new () => unknown, value as Record<string, unknown>);
      if (repeated.length) throw await this.withOtherIssues(repeated, value as Record<string, unknown>, metadata);
    }
    return super.transform(value, metadata);
  }

  /** The refusal of repeated parameters, naming the rest of the query's bad fields beside them. */
  private async withOtherIssues(repeated: FieldIssue[], query: Record<string, unknown>, metadata: ArgumentMetadata): Promise<ApiError> {
    const named = new Set(repeated.map((r) => r.field));
    const rest = Object.fromEntries(Object.entries(query).filter(([key]) => !named.has(key)));
    try {
      await super.transform(rest, metadata);
      return validationError(repeated);
    } catch (e) {
      if (!(e instanceof ApiError) || e.code !== 'validation_error') throw e;
      const others = (e.details?.fields as FieldIssue[]).filter((f) => !named.has(f.field));
      return validationError([...repeated, ...others]);
    }
  }

  /**
   * Nest's pipe deletes `__proto__`, `prototype` and `constructor` keys, at any depth, in the
   * value itself, before class-transformer sees it. The input policy has refused those keys
   * wherever input enters (input-policy.ts), except in what a handler checks itself
   * (@PerElementBody): there, deleting them would only make a refused field vanish unnoticed.
   */
  protected override stripProtoKeys(): void {}

  /**
   * Nest's pipe walks every array of the value for gaps, which a sparse array made by `qs` from
   * `a[1000]=x` would have. The bodies (JSON, and forms read without `qs`'s nesting) and query
   * strings read here cannot hold one, and the walk cost about 0.2 µs a value.
   */
  protected override closeArrayGaps(): void {}
}

/**
 * A query parameter that may be given more than once (it then arrives as an array, which its
 * checks take). Any other declared parameter given twice is refused as given twice
 * (repeatedParameters), not as "must be a string" or "must be an integer". Kept as a check that
 * passes everything, so that a query built with OmitType/PickType keeps it as it keeps the rest.
 */
export const Repeatable = () => ValidateBy({ name: 'repeatable', validator: { validate: () => true } });

/** The refusal of a single-valued parameter given more than once, wherever one is refused (the pages too). */
export const giveOnce = (field: string) => `give ${field} once`;

/** The declared, non-@Repeatable parameters of a query that arrived more than once. */
function repeatedParameters(dto: new () => unknown, query: Record<string, unknown>): FieldIssue[] {
  const checks = checksOf(dto);
  return Object.keys(query)
    .filter((key) => Array.isArray(query[key]) && checks.has(key) && !checks.get(key)!.some((m) => m.name === 'repeatable'))
    .map((field) => ({ field, message: `${giveOnce(field)}${checks.get(field)!.some((m) => m.name === 'isCommaList') ? ', as one comma-separated list' : ''}` }));
}

/**
 * The global pipe refuses unknown fields. `{ unknownFields: 'drop' }` makes one that drops them
 * instead, for input another party shapes (an upstream's redirect), applied through a custom
 * parameter decorator, which the global pipe leaves alone.
 */
export function createValidationPipe(o: { unknownFields: 'refuse' | 'drop' } = { unknownFields: 'refuse' }): ValidationPipe {
  return new ObjectBodyValidationPipe({
    whitelist: true,
    forbidNonWhitelisted: o.unknownFields === 'refuse',
    transform: true,
    forbidUnknownValues: true,
    validateCustomDecorators: o.unknownFields === 'drop',
    exceptionFactory: (errors) => validationError(validationIssues(errors)),
    transformerPackage: { plainToInstance: plainToDto, classToPlain } as never,
  });
}

/** What class-transformer builds in place of an Untransformed field's objects: nothing to copy. */
@Exclude()
class Untouched {}

const UNTRANSFORMED = Symbol('Untransformed');

/**
 * A field the handler receives as the client sent it, and checks itself (POST /items/bulk checks
 * each element as POST /items checks its body, the input policy included). class-transformer
 * would rebuild it, and on the way drop the keys it takes for its own (`valueOf`, `toString`,
 * …), make a `__proto__` key the copy's prototype, or throw on `{"constructor": 1}`: so it does
 * not look inside (its objects become field-less Untouched) and the value sent is put back.
 */
export const Untransformed = () =>
  applyDecorators(
    Type(() => Untouched),
    Transform(({ obj, key }) => (obj as Record<string, unknown>)[key], { toClassOnly: true }),
    (target: object, key: string | symbol) => Reflect.defineMetadata(UNTRANSFORMED, true, target, key),
  );

/** Whether the DTO class `dto` marks `field` @Untransformed (which @PerElementBody requires of its route's body). */
export const isUntransformed = (dto: unknown, field: string): boolean =>
  typeof dto === 'function' && Reflect.getMetadata(UNTRANSFORMED, dto.prototype as object, field) === true;

/**
 * Like `@IsOptional()`, but only an absent field is skipped: an explicit `null` is validated
 * (and so refused) instead of reaching a NOT NULL column as a 500.
 */
export const IsOptionalNonNull = () => ValidateIf((_object, value) => value !== undefined);

/**
 * Control characters (C0, DEL, C1), the line and paragraph separators (U+2028, U+2029: line
 * breaks as much as a newline is) and the bidirectional overrides and isolates (U+202A–U+202E,
 * U+2066–U+2069): in a name they would make it display as other text than it is, or reorder what
 * is shown after it. The pages strip them from names stored before the rule (oidc/pages.ts).
 */
export const UNREADABLE_CHARACTER = /[\p{Cc}\u2028\u2029\u202A-\u202E\u2066-\u2069]/u;

/**
 * What shows nothing by itself: whitespace, the default-ignorable code points (zero-width spaces
 * and joiners, the soft hyphen, variation selectors, tag characters, the Hangul fillers U+115F,
 * U+1160, U+3164 and U+FFA0), and the Braille blank U+2800, which fonts draw as an empty cell.
 * `trim()` knows only the first.
 */
const INVISIBLE = String.raw`\p{White_Space}\p{Default_Ignorable_Code_Point}\u2800`;
const BLANK = new RegExp(`^[${INVISIBLE}]*$`, 'u');

/** Text with no character a reader sees: a page would show "Allow <strong></strong> to:". */
export const isBlank = (text: string): boolean => BLANK.test(text);

/**
 * A name people read (a user's, a tenant's, an OAuth client's; isUserName in
 * src/users/users.dto.ts adds the length): not blank (isBlank) and without an
 * UNREADABLE_CHARACTER.
 */
export const isReadableName = (v: unknown): v is string => typeof v === 'string' && !UNREADABLE_CHARACTER.test(v) && !isBlank(v);

/**
 * Characters an identifier people read and compare (an email, shown on the pages and sent to
 * apps as `email` and `preferred_username`) must not hold: controls, format characters (the
 * bidirectional marks, overrides and isolates, zero-width characters) and any other INVISIBLE
 * one, each of which would make two different addresses look alike, or one look like another.
 */
const HIDDEN_CHARACTER = new RegExp(`[\\p{Cc}\\p{Cf}${INVISIBLE}]`, 'u');

export const hasHiddenCharacter = (text: string): boolean => HIDDEN_CHARACTER.test(text);

const SURROGATE_PAIR = /[\uD800-\uDBFF][\uDC00-\uDFFF]/g;

/**
 * A text's length as the README, SPEC and OpenAPI document (JSON Schema's maxLength) state
 * limits: in characters, counted by code point. An emoji is one, ❤️ (with its variation
 * selector) two; class-validator's isLength leaves out the variation selectors, so a text of
 * twice the limit passed it.
 */
export const codePointLength = (text: string): number => text.length - (text.match(SURROGATE_PAIR)?.length ?? 0);

/** Whether `text` has `min` to `max` characters (codePointLength). UTF-16 units, never fewer nor more than twice as many, bound the input before it is counted. */
export function hasCharLength(text: string, min: number, max: number): boolean {
  if (text.length < min || text.length > 2 * max) return false;
  const length = codePointLength(text);
  return length >= min && length <= max;
}

/**
 * The length check of every text field and text query parameter, in place of class-validator's
 * Length, MinLength and MaxLength (worded as they are): `min` to `max` characters, counted as
 * codePointLength counts them, which is how the OpenAPI document's minLength and maxLength count.
 */
export const CharLength = (min: number, max: number, options?: ValidationOptions) =>
  applyDecorators(
    ValidateBy(
      {
        name: 'charLength',
        constraints: [min, max],
        validator: {
          validate: (v: unknown) => typeof v === 'string' && hasCharLength(v, min, max),
          defaultMessage: buildMessage(
            (each, args) =>
              typeof args?.value === 'string' && codePointLength(args.value) < min
                ? `${each}$property must be longer than or equal to ${min} characters`
                : `${each}$property must be shorter than or equal to ${max} characters`,
            options,
          ),
        },
      },
      options,
    ),
    // The document states the bounds the check applies (an ApiProperty above it may still say more).
    ApiProperty(options?.each ? { items: { type: 'string', ...lengthBounds(min, max) } } : lengthBounds(min, max)),
  );

const lengthBounds = (min: number, max: number) => ({ ...(min > 0 && { minLength: min }), maxLength: max });

/** At most `max` characters (CharLength). */
export const MaxChars = (max: number, options?: ValidationOptions) => CharLength(0, max, options);

/** Most entries a permission map holds. */
const MAX_PERMISSION_ENTRIES = 200;

/** A map of name pattern (`*`, `a.b`, `a.b.*`) to `read` | `write`. */
export function IsPermissionMap(options?: ValidationOptions) {
  return (object: object, propertyName: string) =>
    registerDecorator({
      name: 'isPermissionMap',
      target: object.constructor,
      propertyName,
      options: {
        message: `must map at most ${MAX_PERMISSION_ENTRIES} patterns like "*", "core.note" or "core.*" to "read" or "write"`,
        ...options,
      },
      validator: {
        validate(value: unknown) {
          if (value === null || typeof value !== 'object' || Array.isArray(value)) return false;
          const entries = Object.entries(value as Record<string, unknown>);
          return entries.length <= MAX_PERMISSION_ENTRIES && entries.every(([k, v]) => isPattern(k) && (v === 'read' || v === 'write'));
        },
      },
    });
}

/** A list of type names or patterns (`core.note`, `core.*`, `*`). */
export const IsPatternList = () =>
  ValidateBy({
    name: 'isPatternList',
    validator: {
      validate: (v: unknown) => Array.isArray(v) && v.every((p) => typeof p === 'string' && isPattern(p)),
      defaultMessage: () => 'must list type names or patterns such as "core.note", "core.*" or "*"',
    },
  });

/** One type name or pattern (`core.note`, `core.*`, `*`). */
export const IsTypePattern = () =>
  ValidateBy({
    name: 'isTypePattern',
    validator: {
      validate: (v: unknown) => typeof v === 'string' && isPattern(v),
      defaultMessage: () => 'must be a type name or a pattern such as "core.*" or "*"',
    },
  });

/** A dotted lowercase name: a type, an edge type, an extension namespace. */
export const IsDottedName = () =>
  ValidateBy({
    name: 'isDottedName',
    validator: {
      validate: (v: unknown) => typeof v === 'string' && isDottedName(v),
      defaultMessage: () => 'must be a dotted lowercase name such as "acme.recipe"',
    },
  });

/**
 * A query-string integer from `min` to `max`: only plain decimal digits become a number, so
 * `0x10`, ` 5`, `1e3`, `+5` and `5.0` are refused, as the docs promise, with one message. The
 * OpenAPI document says the same (`type: integer` and the range); an `@ApiPropertyOptional`
 * beside it adds a description or default without undoing that.
 */
const decimalInt = (value: unknown): unknown => (typeof value === 'string' && /^[0-9]{1,15}$/.test(value) ? Number(value) : value);
const intInRange = (v: unknown, min: number, max: number): v is number => Number.isInteger(v) && (v as number) >= min && (v as number) <= max;
const intRule = (min: number, max: number) => `must be a decimal integer from ${min} to ${max}`;

export const IsQueryInt = (min: number, max: number) =>
  applyDecorators(
    ApiPropertyOptional({ type: 'integer', minimum: min, maximum: max }),
    Transform(({ value }) => decimalInt(value)),
    ValidateBy({
      name: 'isQueryInt',
      validator: {
        validate: (v: unknown) => intInRange(v, min, max),
        defaultMessage: () => intRule(min, max),
      },
    }),
  );

/** A path parameter read as IsQueryInt reads a query's: else 400 validation_error naming it. */
export const ParseIntParam = (min: number, max: number): PipeTransform<string, number> => ({
  transform(value: string, metadata: ArgumentMetadata): number {
    const n = decimalInt(value);
    if (intInRange(n, min, max)) return n;
    throw validationError([{ field: metadata.data ?? 'parameter', message: intRule(min, max) }]);
  },
});

/**
 * A query-string boolean: exactly `true` or `false` (a query string has no booleans, and
 * `Boolean('false')` is true), anything else refused with one message; documented as a boolean.
 */
export const IsQueryBoolean = () =>
  applyDecorators(
    ApiPropertyOptional({ type: 'boolean' }),
    Transform(({ value }) => (value === 'true' ? true : value === 'false' ? false : value)),
    ValidateBy({
      name: 'isQueryBoolean',
      validator: { validate: (v: unknown) => typeof v === 'boolean', defaultMessage: () => 'must be true or false' },
    }),
  );

/** The largest value of a PostgreSQL `integer` column (item versions). */
export const MAX_INT4 = 2_147_483_647;

const RFC3339_RE = /^(\d{4})-(\d{2})-(\d{2})[Tt](\d{2}):(\d{2}):(\d{2})(?:\.(\d{1,9}))?([Zz]|([+-])(\d{2}):(\d{2}))$/;

const MIN_INSTANT = Date.parse('0001-01-01T00:00:00.000Z');
const MAX_INSTANT = Date.parse('9999-12-31T23:59:59.999Z');

/**
 * An RFC 3339 date-time as the service keeps it, or undefined when it is not one. A zone (`Z`
 * or `±hh:mm`) is required, and every field in range. Narrowings: offsets up to ±15:59 (no zone
 * is further out; PostgreSQL refuses more); a leap second (`:60`) is refused, as neither
 * JavaScript nor PostgreSQL keep one; digits past the millisecond are cut off here, before the
 * value goes anywhere, since PostgreSQL would round them instead (`.9999999` into the next second,
 * `9999-12-31T23:59:59.9999999Z` into year 10000); and the instant, once cut and the offset
 * applied, must fall in years 1 to 9999, so that it stores, and reads back, as RFC 3339.
 */
export function rfc3339Instant(value: unknown): Date | undefined {
  if (typeof value !== 'string') return undefined;
  const m = RFC3339_RE.exec(value);
  if (!m) return undefined;
  const [year, month, day, hour, minute, second] = m.slice(1, 7).map(Number);
  const daysInMonth = new Date(Date.UTC(year, month, 0)).getUTCDate();
  const zoneOk = m[9] === undefined || (Number(m[10]) <= 15 && Number(m[11]) <= 59);
  if (!(year >= 1 && month >= 1 && month <= 12 && day >= 1 && day <= daysInMonth && hour <= 23 && minute <= 59 && second <= 59 && zoneOk)) {
    return undefined;
  }
  const millis = (m[7] ?? '').slice(0, 3).padEnd(3, '0');
  const zone = m[9] === undefined ? 'Z' : `${m[9]}${m[10]}:${m[11]}`;
  // ECMAScript's own date-time format, which every engine parses alike.
  const instant = Date.parse(`${m[1]}-${m[2]}-${m[3]}T${m[4]}:${m[5]}:${m[6]}.${millis}${zone}`);
  return instant >= MIN_INSTANT && instant <= MAX_INSTANT ? new Date(instant) : undefined;
}

export const isRfc3339 = (value: unknown): boolean => rfc3339Instant(value) !== undefined;

/**
 * A date-time field: validated as `rfc3339Instant` says, and replaced by the instant it keeps,
 * in UTC (`2026-01-02T03:04:05.123Z`), so that what is stored or compared is what reads back.
 */
export const IsRfc3339 = () =>
  applyDecorators(
    Transform(({ value }) => rfc3339Instant(value)?.toISOString() ?? value),
    ValidateBy({
      name: 'isRfc3339',
      validator: {
        validate: isRfc3339,
        defaultMessage: () => 'must be an RFC 3339 date-time with a time zone (years 0001 to 9999 in UTC), such as "2026-01-02T03:04:05Z"',
      },
    }),
  );

/**
 * A string query parameter: validated, and documented with the same numbers, so that the
 * OpenAPI document's minLength and maxLength are the limits the validator enforces. A required
 * one that is missing is named as missing (validation_error), as a body field is.
 */
export function TextParam(o: { required?: boolean; minLength?: number; maxLength: number; description?: string }) {
  const { required = false, minLength, maxLength, description } = o;
  return applyDecorators(
    (required ? ApiProperty : ApiPropertyOptional)({ type: String, minLength, maxLength, description }),
    required ? IsDefined({ message: 'is required' }) : IsOptionalNonNull(),
    IsString(),
    CharLength(minLength ?? 0, maxLength),
  );
}

/** A comma list's entries, trimmed (`a, b` is `a` and `b`). */
export const splitCommaList = (list: string): string[] => list.split(',').map((entry) => entry.trim());

/**
 * The rule of every comma-list query parameter (`tags`, `events`, `type_filter`): one string of
 * at most `maxLength` characters, given once (the pipe refuses a repeated one), with no empty
 * entry (`a,,b`, `a,`, or nothing at all): an empty entry is a mistake, which dropping would
 * hide, and an empty list reads as "no filter". splitCommaList then reads it.
 */
export const IsCommaList = (maxLength: number) =>
  ValidateBy({
    name: 'isCommaList',
    validator: {
      validate: (v: unknown) => typeof v === 'string' && v.length <= maxLength && splitCommaList(v).every(Boolean),
      defaultMessage: (args) => {
        const v = args?.value;
        if (typeof v !== 'string') return 'must be a comma-separated list';
        if (v.length > maxLength) return `must be at most ${maxLength} characters`;
        return `give ${args!.property} as a comma-separated list without empty entries ("a,b", not "a,,b", "a," or "")`;
      },
    },
  });
