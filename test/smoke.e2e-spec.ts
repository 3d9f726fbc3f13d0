import { bootstrapAdmin, bearer, startApp, TestApp } from './support/app';

describe('smoke', () => {
  let t: TestApp;
  beforeAll(async () => (t = await startApp()));
  afterAll(() => t.close());

  it('serves health and bootstraps', async () => {
    await t.http.get('/health').expect(200, { status: 'ok', checks: { database: 'up', redis: 'up' } });
    const admin = await bootstrapAdmin(t);
    const res = await t.http.get('/keys').set(bearer(admin.key)).expect(200);
    expect(res.body.keys).toHaveLength(1);
  });
});
