/**
 * Request validation: the global ValidationPipe (whitelisting, 400 `validation_error` listing
 * every bad field) and the reusable decorators the DTOs share.
 */
import { ValidationError, ValidationPipe } from '@nestjs/common';
import { registerDecorator, ValidateBy, ValidateIf, ValidationOptions } from 'class-validator';
import { ApiError } from './api-error';
import { isDottedName, isPattern } from './type-pattern';

export interface FieldIssue {
  field: string;
  message: string;
}

function flatten(errors: ValidationError[], parent = ''): FieldIssue[] {
  const out: FieldIssue[] = [];
  for (const e of errors) {
    const field = parent ? `${parent}.${e.property}` : e.property;
    if (e.constraints) {
      const messages = Object.entries(e.constraints).map(([name, msg]) =>
        name === 'whitelistValidation' ? 'is not a known field' : msg.startsWith(e.property + ' ') ? msg.slice(e.property.length + 1) : msg,
      );
      out.push({ field, message: messages.join('; ') });
    }
    if (e.children?.length) out.push(...flatten(e.children, field));
  }
  return out;
}

export function validationError(fields: FieldIssue[], message = 'The request has invalid fields'): ApiError {
  return ApiError.badRequest('validation_error', message, { fields });
}

export function createValidationPipe(): ValidationPipe {
  return new ValidationPipe({
    whitelist: true,
    forbidNonWhitelisted: true,
    transform: true,
    forbidUnknownValues: true,
    exceptionFactory: (errors) => validationError(flatten(errors)),
  });
}

/**
 * Like `@IsOptional()`, but only an absent field is skipped: an explicit `null` is validated
 * (and so refused) instead of reaching a NOT NULL column as a 500.
 */
export const IsOptionalNonNull = () => ValidateIf((_object, value) => value !== undefined);

/** A map of name pattern (`*`, `a.b`, `a.b.*`) to `read` | `write`. */
export function IsPermissionMap(options?: ValidationOptions) {
  return (object: object, propertyName: string) =>
    registerDecorator({
      name: 'isPermissionMap',
      target: object.constructor,
      propertyName,
      options: {
        message: `must map patterns like "*", "core.note" or "core.*" to "read" or "write"`,
        ...options,
      },
      validator: {
        validate(value: unknown) {
          if (value === null || typeof value !== 'object' || Array.isArray(value)) return false;
          const entries = Object.entries(value as Record<string, unknown>);
          return entries.length <= 200 && entries.every(([k, v]) => isPattern(k) && (v === 'read' || v === 'write'));
        },
      },
    });
}

/** A dotted lowercase name: a type, an edge type, an extension namespace. */
export const IsDottedName = () =>
  ValidateBy({
    name: 'isDottedName',
    validator: {
      validate: (v: unknown) => typeof v === 'string' && isDottedName(v),
      defaultMessage: () => 'must be a dotted lowercase name such as "acme.recipe"',
    },
  });
