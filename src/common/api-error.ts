/**
 * The one error type of the service. Every failure a client can see is an ApiError (or is
 * turned into one by the global filter), so `error.code` is always one of SPEC part 7's codes,
 * or one of the 5xx ones SPEC leaves open: `internal_error` (a bug), `service_unavailable`
 * (a dependency away), `upstream_unavailable` (502: a third party's endpoint called on the
 * client's behalf, a connector's token endpoint, did not answer, could not be used or may not be called).
 */
export type ErrorCode =
  | 'validation_error' | 'missing_required_field' | 'invalid_type' | 'invalid_id' | 'invalid_transition'
  | 'invalid_request' | 'invalid_grant' | 'invalid_client' | 'invalid_scope' | 'token_reuse_detected'
  | 'inheritance_violation' | 'edge_constraint_violation' | 'edge_cycle' | 'invalid_properties'
  | 'invalid_schema' | 'bulk_cap_exceeded' | 'authorization_pending' | 'slow_down' | 'expired_token'
  | 'unauthorized' | 'forbidden' | 'type_not_permitted' | 'edge_permission_denied' | 'core_type_immutable'
  | 'not_found' | 'item_not_found' | 'blob_not_found' | 'type_not_found' | 'edge_not_found'
  | 'edge_type_not_found' | 'webhook_not_found' | 'bulk_job_not_found' | 'integration_not_found'
  | 'conflict' | 'version_conflict' | 'duplicate_source' | 'type_already_exists' | 'type_in_use'
  | 'blob_too_large' | 'rate_limited' | 'internal_error' | 'service_unavailable' | 'upstream_unavailable';

export interface ErrorEnvelope {
  error: { code: ErrorCode; message: string; details?: Record<string, unknown> };
}

export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly code: ErrorCode,
    message: string,
    readonly details?: Record<string, unknown>,
  ) {
    super(message);
  }

  toEnvelope(): ErrorEnvelope {
    return { error: { code: this.code, message: this.message, ...(this.details ? { details: this.details } : {}) } };
  }

  static unauthorized(message = 'A valid bearer token is required', code: ErrorCode = 'unauthorized') {
    return new ApiError(401, code, message);
  }
  static forbidden(message = 'This credential may not do that') {
    return new ApiError(403, 'forbidden', message);
  }
  static notFound(code: ErrorCode, message: string) {
    return new ApiError(404, code, message);
  }
  static conflict(code: ErrorCode, message: string, details?: Record<string, unknown>) {
    return new ApiError(409, code, message, details);
  }
  static badRequest(code: ErrorCode, message: string, details?: Record<string, unknown>) {
    return new ApiError(400, code, message, details);
  }
  /**
   * A refusal that says "not now": something else under way holds what the request needs, and the
   * same request may succeed in `retryAfterSeconds`. It carries Retry-After, and an idempotent
   * request's key does not keep it (retryAfterOf).
   */
  static busy(message: string, retryAfterSeconds = 1) {
    return new ApiError(409, 'conflict', message, { retry_after: retryAfterSeconds });
  }
}

/**
 * When a refused request may be sent again, in seconds, for a refusal that is about the moment
 * rather than the request (a 429, a busy 409): `details.retry_after`. Undefined for a final answer.
 */
export function retryAfterOf(error: ApiError): number | undefined {
  const after = error.details?.retry_after;
  return typeof after === 'number' ? after : undefined;
}
