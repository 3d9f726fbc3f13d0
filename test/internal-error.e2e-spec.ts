/**
 * An unexpected failure is a 500 internal_error that leaks nothing but a request id. Produced
 * for real: the key table is dropped under a running server (this app's own database).
 */
import { bearer, bootstrapAdmin, startApp, TestApp } from './support/app';
import { expectError } from './support/envelope';

describe('unexpected errors', () => {
  let t: TestApp;
  afterAll(() => t?.close());

  it('are 500 internal_error with details.request_id equal to X-Request-Id, and no internals', async () => {
    t = await startApp();
    const admin = await bootstrapAdmin(t);
    // Resolve the key once so it is cached: the list query below is what fails.
    await t.http.get('/keys').set(bearer(admin.key)).expect(200);
    await t.sql('DROP TABLE api_keys CASCADE');

    const res = await t.http.get('/keys').set(bearer(admin.key));
    const error = expectError(res, 500, 'internal_error');
    expect(res.headers['x-request-id']).toEqual(expect.any(String));
    expect(error.details).toEqual({ request_id: res.headers['x-request-id'] });
    const text = res.text.toLowerCase();
    for (const leak of ['api_keys', 'relation', 'select', 'does not exist', 'typeorm', 'queryfailed', 'stack', '.ts:', 'node_modules']) {
      expect(text).not.toContain(leak);
    }

    const echoed = await t.http.get('/keys').set(bearer(admin.key)).set('X-Request-Id', 'trace-me-123');
    expect(expectError(echoed, 500, 'internal_error').details).toEqual({ request_id: 'trace-me-123' });

    // The server survives it.
    await t.http.get('/health').expect(200);
  });
});
