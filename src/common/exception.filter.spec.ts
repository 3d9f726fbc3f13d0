import { QueryRunnerAlreadyReleasedError } from 'typeorm';
import { BadRequestException, HttpException, MethodNotAllowedException, NotFoundException } from '@nestjs/common';
import { ApiError } from './api-error';
import { toApiError } from './exception.filter';

describe('toApiError', () => {
  it('passes ApiErrors through unchanged', () => {
    const e = ApiError.conflict('duplicate_source', 'taken', { source: 'x' });
    expect(toApiError(e, 'rid')).toBe(e);
  });

  it('maps Nest HttpExceptions by status', () => {
    const notFound = toApiError(new NotFoundException('Cannot GET /nope'), 'rid');
    expect(notFound.status).toBe(404);
    expect(notFound.code).toBe('not_found');
    expect(notFound.toEnvelope()).toEqual({ error: { code: 'not_found', message: expect.any(String) } });
    expect(toApiError(new MethodNotAllowedException(), 'rid').code).toBe('not_found');
    const named = toApiError(new NotFoundException('Cannot GET /nope'), 'rid', { method: 'GET', url: `/nope/${'x'.repeat(300)}?api_key=secret` });
    expect(named.details).toEqual({ method: 'GET', path: `/nope/${'x'.repeat(250)}` });
    const bad = toApiError(new BadRequestException('nope'), 'rid');
    expect([bad.status, bad.code]).toEqual([400, 'invalid_request']);
    expect(toApiError(new HttpException('slow down', 429), 'rid').code).toBe('rate_limited');
  });

  it('turns anything else into a 500 internal_error that leaks nothing but the request id', () => {
    const secret = 'password authentication failed for user "svc" at 10.0.0.5';
    for (const thrown of [new Error(secret), new TypeError(secret), secret, { message: secret }, undefined, new HttpException(secret, 418)]) {
      const e = toApiError(thrown, 'req-123');
      expect(e.status).toBe(500);
      expect(e.code).toBe('internal_error');
      expect(JSON.stringify(e.toEnvelope())).not.toContain('password');
      expect(e.details).toEqual({ request_id: 'req-123' });
    }
    expect(toApiError(new Error(secret), undefined).details).toBeUndefined();
  });

  it('turns a dependency that is away into a 503 service_unavailable, however it is wrapped', () => {
    const wrapped = (driverError: object) => Object.assign(new Error('query failed: SELECT 1'), { driverError });
    const away = [
      new Error('Connection terminated unexpectedly'),
      new Error('timeout exceeded when trying to connect'),
      wrapped(new Error('Query read timeout')),
      wrapped(Object.assign(new Error('terminating connection due to administrator command'), { code: '57P01' })),
      Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:5432'), { code: 'ECONNREFUSED' }),
      new Error('Connection is closed.'),
      new Error('Redis is not connected (reconnecting)'),
      // A session PostgreSQL ended for sitting idle in its transaction, and TypeORM's word for a
      // transaction whose connection was ended under it (an audit saw both answered 500).
      wrapped(Object.assign(new Error('terminating connection due to idle-in-transaction timeout'), { code: '25P03' })),
      new Error('Database connection provided by a query runner was already released, cannot continue to use its querying methods anymore.'),
      // TypeORM's word at COMMIT for a transaction whose connection failed under it (an audit
      // terminating sessions under load saw ~1% of writes answered 500).
      new QueryRunnerAlreadyReleasedError(),
      // pg's for a client whose connection failed just as it was handed out (pg-guards.ts).
      wrapped(new Error('Client has encountered a connection error and is not queryable')),
    ];
    for (const thrown of away) {
      const e = toApiError(thrown, 'req-1');
      expect([e.status, e.code]).toEqual([503, 'service_unavailable']);
      expect(e.details).toEqual({ request_id: 'req-1' });
    }
    // A failed statement is not an outage: a unique violation.
    expect(toApiError(wrapped(Object.assign(new Error('x'), { code: '23505' })), 'r').status).toBe(500);
  });

  it('turns a statement cancelled at DATABASE_STATEMENT_TIMEOUT_MS into a 503 service_unavailable: it changed nothing, and may be sent again', () => {
    const timedOut = Object.assign(new Error('query failed'), { driverError: Object.assign(new Error('canceling statement due to statement timeout'), { code: '57014' }) });
    const e = toApiError(timedOut, 'req-3');
    expect([e.status, e.code]).toEqual([503, 'service_unavailable']);
    expect(e.details).toEqual({ request_id: 'req-3' });
  });

  it('turns a transaction that lost to concurrent ones (deadlock, serialization failure, lock timeout) into a 409 conflict', () => {
    for (const code of ['40P01', '40001', '55P03']) {
      const lost = Object.assign(new Error('query failed'), { driverError: Object.assign(new Error('deadlock detected'), { code }) });
      const e = toApiError(lost, 'req-2');
      expect([e.status, e.code]).toEqual([409, 'conflict']);
      expect(e.details).toEqual({ request_id: 'req-2' });
    }
  });
});
