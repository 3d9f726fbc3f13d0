/** Documents a route's error responses, all in the SPEC 2.9 envelope. */
import { applyDecorators } from '@nestjs/common';
import { ApiProperty, ApiPropertyOptional, ApiResponse } from '@nestjs/swagger';
import type { ErrorCode } from '../common/api-error';

/** Every code an envelope carries: ErrorCode's, which `satisfies` holds this list to, both ways. */
const ERROR_CODES = Object.keys({
  validation_error: 0, missing_required_field: 0, invalid_type: 0, invalid_id: 0, invalid_transition: 0,
  invalid_request: 0, invalid_grant: 0, invalid_client: 0, invalid_scope: 0, token_reuse_detected: 0,
  inheritance_violation: 0, edge_constraint_violation: 0, edge_cycle: 0, invalid_properties: 0,
  invalid_schema: 0, bulk_cap_exceeded: 0, authorization_pending: 0, slow_down: 0, expired_token: 0,
  unauthorized: 0, forbidden: 0, type_not_permitted: 0, edge_permission_denied: 0, core_type_immutable: 0,
  not_found: 0, item_not_found: 0, blob_not_found: 0, type_not_found: 0, edge_not_found: 0,
  edge_type_not_found: 0, webhook_not_found: 0, bulk_job_not_found: 0, integration_not_found: 0,
  conflict: 0, version_conflict: 0, duplicate_source: 0, type_already_exists: 0, type_in_use: 0,
  blob_too_large: 0, rate_limited: 0, internal_error: 0, service_unavailable: 0, upstream_unavailable: 0,
} satisfies Record<ErrorCode, 0>);

class ErrorBody {
  @ApiProperty({ enum: ERROR_CODES, description: 'Stable, machine-readable code (SPEC part 7; internal_error, service_unavailable and upstream_unavailable for 5xx and 502)' }) code: ErrorCode;
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
