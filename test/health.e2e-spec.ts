/** CONTRACT "Service basics": GET /health, 200 when both dependencies answer, 503 when one does not. */
import { bearer, PG_SERVER, REDIS_URL, startApp, TestApp } from './support/app';
import { TcpProxy } from './support/tcp-proxy';
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
    let t: TestApp;
    let pg: TcpProxy;
    let redis: TcpProxy;

    beforeAll(async () => {
      const pgUrl = new URL(PG_SERVER);
      const redisUrl = new URL(REDIS_URL);
      pg = await new TcpProxy(pgUrl.hostname, Number(pgUrl.port || 5432)).start();
      redis = await new TcpProxy(redisUrl.hostname, Number(redisUrl.port || 6379)).start();
      const viaPg = new URL(PG_SERVER);
      viaPg.port = String(pg.port);
      const viaRedis = new URL(REDIS_URL);
      viaRedis.port = String(redis.port);
      t = await startApp({
        DATABASE_URL: `${viaPg.toString().replace(/\/$/, '')}/svc_test_health_${process.pid}_${Date.now()}`,
        REDIS_URL: viaRedis.toString(),
      });
    });
    afterAll(async () => {
      await pg?.restore().catch(() => undefined);
      await t?.close();
      await pg?.stop();
      await redis?.stop();
    });

    const health = () => t.http.get('/health');
    const until = (status: number, body: object) =>
      waitFor(async () => {
        const res = await health();
        return res.status === status && JSON.stringify(res.body) === JSON.stringify(body) ? res : undefined;
      }, `GET /health → ${status} ${JSON.stringify(body)}`);

    it('reports 503 with the same shape naming Redis, and recovers', async () => {
      await health().expect(200, { status: 'ok', checks: { database: 'up', redis: 'up' } });
      await redis.cut();
      const res = await until(503, { status: 'degraded', checks: { database: 'up', redis: 'down' } });
      expect(res.headers['content-type']).toMatch(/^application\/json/);
      await redis.restore();
      await until(200, { status: 'ok', checks: { database: 'up', redis: 'up' } });
    });

    it('reports 503 with the same shape naming the database, and recovers', async () => {
      await pg.cut();
      await until(503, { status: 'degraded', checks: { database: 'down', redis: 'up' } });
      await pg.restore();
      await until(200, { status: 'ok', checks: { database: 'up', redis: 'up' } });
    });
  });
});
