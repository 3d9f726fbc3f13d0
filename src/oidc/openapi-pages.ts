/**
 * OpenAPI declarations shared by the browser-facing /auth pages (interactions, account and
 * device controllers): HTML answers, 303 redirects, form bodies and query parameters.
 * Documentation only.
 */
import { applyDecorators } from '@nestjs/common';
import { ApiBody, ApiConsumes, ApiExtraModels, ApiQuery, ApiResponse, ApiSecurity, getSchemaPath } from '@nestjs/swagger';
import { ErrorEnvelopeDto } from '../openapi/api-errors.decorator';

const str = { type: 'string' as const };

/** An HTML page answered with `status`. */
export const ApiPage = (status: number, description: string) => ApiResponse({ status, description, content: { 'text/html': { schema: str } } });

/** A 303 redirect. */
export const ApiSeeOther = (description: string) =>
  ApiResponse({ status: 303, description, headers: { Location: { description: 'Where to go next', schema: str } } });

/**
 * An error answered as a page to a browser's form post and in the error envelope to a JSON
 * caller (the account pages' routes that take both).
 */
export const ApiPageOrError = (status: number, description: string) =>
  applyDecorators(
    ApiExtraModels(ErrorEnvelopeDto),
    ApiResponse({ status, description, content: { 'text/html': { schema: str }, 'application/json': { schema: { $ref: getSchemaPath(ErrorEnvelopeDto) } } } }),
  );

/**
 * The account pages, which their own sign-in's cookie (`account_session`) authenticates: a
 * browser that is not signed in goes to sign in (303); a JSON caller, or any non-GET, gets 401.
 * With `formPost` (a route a page's form posts to), a browser's form post gets a 401 page with a
 * link to sign in again instead.
 */
export const ApiSignedInUser = (o: { formPost?: boolean } = {}) =>
  applyDecorators(
    ApiSecurity('account_session'),
    ApiSeeOther('Not signed in (a browser GET): to /auth/sign-in?return_to=…'),
    o.formPost
      ? ApiPageOrError(401, 'Not signed in: a browser\'s form post gets the "Signed out" page, linking to /auth/sign-in?return_to=…; a JSON caller, or another request, unauthorized')
      : ApiResponse({ status: 401, description: 'Not signed in (unauthorized), for a JSON caller or a POST/DELETE', type: ErrorEnvelopeDto }),
  );

/** The 403 page of a form post whose CSRF token is missing or stale. */
export const ApiFormExpired = () => ApiPage(403, '"Form expired": the CSRF token is missing or stale');

/** As ApiFormExpired, for a route that also answers JSON callers: they get the envelope (forbidden). */
export const ApiFormExpiredOrError = () => ApiPageOrError(403, '"Form expired": a form-encoded body without its valid CSRF token (a caller that reads JSON: forbidden, in the envelope)');

/** A form-encoded body with these fields (a repeated field is an array). */
export const ApiFormBody = (properties: Record<string, object>, required: string[] = [], ...otherTypes: string[]) =>
  applyDecorators(
    ApiConsumes('application/x-www-form-urlencoded', ...otherTypes),
    ApiBody({ required: true, schema: { type: 'object', properties, required } }),
  );

/** Optional string query parameters. */
export const ApiQueryParams = (params: Record<string, string>) =>
  applyDecorators(...Object.entries(params).map(([name, description]) => ApiQuery({ name, required: false, type: String, description })));

export const FORM_FIELD = {
  csrf: { ...str, description: 'The CSRF token of the form' },
  uid: { ...str, description: 'The interaction (authorization in progress)' },
  email: str,
  password: { ...str, format: 'password' },
  decision: { type: 'string', enum: ['approve', 'deny'] },
  scope: { type: 'array', items: str, description: 'The scopes left ticked (repeated field)' },
  scopes_shown: { ...str, description: 'Present when the page listed scopes to untick' },
};
