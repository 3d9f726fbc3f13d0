/**
 * ARCHITECTURE "Scale-out": two instances on one database and one Redis prefix behave as one
 * service: rate-limit buckets are shared, and a key change on one is seen by the other.
 */
import { bearer, bootstrapAdmin, createKey, startApp, TestApp } from './support/app';
import { expectError } from './support/envelope';

describe('two instances', () => {
  let a: TestApp;
  let b: TestApp;

  beforeAll(async () => {
    a = await startApp({ RATE_LIMIT_ENABLED: 'true', RATE_LIMIT_REQUESTS: '5' });
    b = await startApp({
      RATE_LIMIT_ENABLED: 'true',
      RATE_LIMIT_REQUESTS: '5',
      DATABASE_URL: a.databaseUrl,
      REDIS_PREFIX: a.config.REDIS_PREFIX,
    });
  });
  afterAll(async () => {
    await b?.app.close();
    await a?.close();
    await b?.close();
  });

  let admin: string;

  it('share rate-limit buckets', async () => {
    admin = (await bootstrapAdmin(a)).key;
    const k = await createKey(a, admin, { label: 'shared' });
    const remaining: string[] = [];
    for (let i = 0; i < 10; i++) {
      const res = await (i % 2 ? b : a).http.get('/health').set(bearer(k.key)).expect(200);
      remaining.push(res.headers['x-ratelimit-remaining']);
    }
    expect(remaining).toEqual(['9', '8', '7', '6', '5', '4', '3', '2', '1', '0']);
    expectError(await a.http.get('/health').set(bearer(k.key)), 429, 'rate_limited');
    expectError(await b.http.get('/health').set(bearer(k.key)), 429, 'rate_limited');
  });

  it('see a role change or a revocation made on the other instance on the next request', async () => {
    const k = await createKey(a, admin, { label: 'moving' });
    expectError(await b.http.get('/keys').set(bearer(k.key)), 403, 'forbidden'); // cached on b as a member
    await a.http.patch(`/keys/${k.id}`).set(bearer(admin)).send({ role: 'admin' }).expect(200);
    await b.http.get('/keys').set(bearer(k.key)).expect(200);
    await a.http.delete(`/keys/${k.id}`).set(bearer(admin)).expect(200);
    expectError(await b.http.get('/keys').set(bearer(k.key)), 401, 'unauthorized');
  });
});
