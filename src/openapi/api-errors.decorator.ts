/** Documents a route's error responses, all in the SPEC 2.9 envelope. */
import { applyDecorators } from '@nestjs/common';
import { ApiProperty, ApiPropertyOptional, ApiResponse } from '@nestjs/swagger';

class ErrorBody {
  @ApiProperty({ description: 'Stable, machine-readable code (SPEC part 7)' }) code: string;
  @ApiProperty({ description: 'Human-readable; wording may change' }) message: string;
  @ApiPropertyOptional({ type: 'object', additionalProperties: true }) details?: Record<string, unknown>;
}

export class ErrorEnvelopeDto {
  @ApiProperty({ type: ErrorBody }) error: ErrorBody;
}

const DESCRIPTIONS: Record<number, string> = {
  400: 'Invalid request (validation_error, invalid_id, invalid_request, ...)',
  401: 'Missing, invalid or revoked bearer token (unauthorized)',
  403: 'The credential lacks a permission (forbidden, ...)',
  404: 'Not found, or invisible to this credential',
  409: 'Conflict with the current state, or a write that collided with concurrent ones (conflict: it changed nothing; send it again)',
  413: 'Request body larger than JSON_BODY_LIMIT (invalid_request, details.limit_bytes)',
  415: 'Unsupported content type, charset or encoding (invalid_request)',
  429: 'Rate limited (rate_limited); see Retry-After',
  502: 'The upstream could not be reached or is not allowed (upstream_unavailable)',
  503: 'A dependency is away (service_unavailable); retry after Retry-After',
};

/** The same response as a plain OpenAPI object, for documentation built after the decorators (openapi.ts). */
export const errorResponse = (status: number) => ({
  description: DESCRIPTIONS[status] ?? 'Error',
  content: { 'application/json': { schema: { $ref: '#/components/schemas/ErrorEnvelopeDto' } } },
});

/**
 * A status, or a status with the route's own description where its answer differs from the
 * pipeline's (`[413, 'Over BLOB_MAX_BYTES (blob_too_large, details.max_bytes)']`); the
 * post-processing in openapi.ts leaves a status a route documented as it is.
 */
export type ApiErrorSpec = number | [status: number, description: string];

export const ApiErrors = (...errors: ApiErrorSpec[]) =>
  applyDecorators(
    ...errors.map((error) => {
      const [status, description] = typeof error === 'number' ? [error, DESCRIPTIONS[error] ?? 'Error'] : error;
      return ApiResponse({ status, description, type: ErrorEnvelopeDto });
    }),
  );
