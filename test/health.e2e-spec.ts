/** CONTRACT "Service basics": GET /health, 200 when both dependencies answer, 503 when one does not. */
import { bearer, startApp } from './support/app';
import { appBehindProxy } from './support/behind-proxy';
import { waitFor } from './support/wait';

describe('health', () => {
  it('is 200 {"status":"ok","checks":{"database":"up","redis":"up"}} without auth', async () => {
    const t = await startApp();
    try {
      const res = await t.http.get('/health').expect(200);
      expect(res.headers['content-type']).toMatch(/^application\/json/);
      expect(res.body).toEqual({ status: 'ok', checks: { database: 'up', redis: 'up' } });
      await t.http.get('/health').set(bearer('svc_k1_invalid')).expect(200);
    } finally {
      await t.close();
    }
  });

  describe('when a dependency goes away', () => {
    const at = appBehindProxy(['postgres', 'redis']);

    const health = () => at.t.http.get('/health');
    const until = (status: number, body: object) =>
      waitFor(async () => {
        const res = await health();
        return res.status === status && JSON.stringify(res.body) === JSON.stringify(body) ? res : undefined;
      }, `GET /health → ${status} ${JSON.stringify(body)}`);

    it('reports 503 with the same shape naming Redis, and recovers', async () => {
      await health().expect(200, { status: 'ok', checks: { database: 'up', redis: 'up' } });
      await at.redis.cut();
      const res = await until(503, { status: 'degraded', checks: { database: 'up', redis: 'down' } });
      expect(res.headers['content-type']).toMatch(/^application\/json/);
      await at.redis.restore();
      await until(200, { status: 'ok', checks: { database: 'up', redis: 'up' } });
    });

    it('reports 503 with the same shape naming the database, and recovers', async () => {
      await at.pg.cut();
      await until(503, { status: 'degraded', checks: { database: 'down', redis: 'up' } });
      await at.pg.restore();
      await until(200, { status: 'ok', checks: { database: 'up', redis: 'up' } });
    });
  });
});
