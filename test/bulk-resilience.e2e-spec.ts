/**
 * Bulk jobs survive what production does to them (issue 17, point 5): a worker SIGKILLed in
 * the middle of a job, Redis losing the queue while jobs are queued and running, two instances
 * sharing the work, one of them shut down gracefully mid-job, and one frozen mid-chunk (SIGSTOP)
 * while it holds its chunk's rows and taken over. In each case every matched
 * item is changed exactly once: its version goes from 1 to 2 and it has exactly two revisions.
 *
 * A job is held at a known point without sleeping: the test locks one item row (SELECT … FOR
 * UPDATE in its own transaction) that sits in a later chunk, so the chunks before it commit
 * and the worker waits on the lock (a bounded wait, tried again) until the test lets go.
 */
import { Client } from 'pg';
import { BulkWorker } from '../src/bulk/bulk-worker';
import { bearer, bootstrapAdmin, clearRedisPrefix, dropDatabase, PG_SERVER, REDIS_URL, startApp, TestApp, uniqueName } from './support/app';
import { ensureBuilt, freePort, runService, Service, waitHealthy } from './support/process';
import { waitFor } from './support/wait';

jest.setTimeout(120_000);

const CHUNK = 500; // CHUNK_SIZE in src/bulk/bulk-actions.ts

interface Http {
  post(path: string, body: unknown): Promise<{ status: number; body: any }>;
  get(path: string): Promise<{ status: number; body: any }>;
}

function http(baseUrl: string, key?: string): Http {
  const headers = { 'content-type': 'application/json', ...(key ? { authorization: `Bearer ${key}` } : {}) };
  const call = async (method: string, path: string, body?: unknown) => {
    const res = await fetch(`${baseUrl}${path}`, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
    return { status: res.status, body: await res.json() };
  };
  return { post: (path, body) => call('POST', path, body), get: (path) => call('GET', path) };
}

/** Creates `count` core.note items tagged `tag`, in creation order; returns their ids. */
async function createNotes(api: Http, tag: string, count: number): Promise<string[]> {
  const ids: string[] = [];
  for (let at = 0; at < count; at += 1000) {
    const items = Array.from({ length: Math.min(1000, count - at) }, (_, i) => ({ type: 'core.note', properties: { title: `${tag} ${at + i}` }, tags: [tag] }));
    const res = await api.post('/items/bulk', { mode: 'upsert', items });
    expect(res.status).toBe(200);
    ids.push(...res.body.results.map((r: { id: string }) => r.id));
  }
  return ids;
}

/** Holds row locks on items (one, or a list) until released; `pid` is the holding session's. */
async function lockItem(databaseUrl: string, id: string | string[]): Promise<{ pid: number; release(): Promise<void> }> {
  const client = new Client({ connectionString: databaseUrl });
  await client.connect();
  await client.query('BEGIN');
  await client.query('SELECT 1 FROM items WHERE id = ANY($1::uuid[]) ORDER BY id FOR UPDATE', [[id].flat()]);
  const [{ pid }] = (await client.query('SELECT pg_backend_pid() AS pid')).rows;
  return {
    pid,
    release: async () => {
      await client.query('ROLLBACK');
      await client.end();
    },
  };
}

/** The sessions waiting for a lock that session `holder` holds, with when their transactions began. */
async function waitingOn(sql: (text: string, params?: unknown[]) => Promise<any[]>, holder: number): Promise<Array<{ pid: number; xact_start: string }>> {
  return sql(`SELECT pid, xact_start::text AS xact_start FROM pg_stat_activity WHERE $1 = ANY(pg_blocking_pids(pid))`, [holder]);
}

async function jobWhen(api: Http, id: string, what: string, ok: (job: any) => boolean): Promise<any> {
  return waitFor(async () => {
    const res = await api.get(`/items/bulk_action/jobs/${id}`);
    return res.status === 200 && ok(res.body) ? res.body : undefined;
  }, what, 60_000, 50);
}

/** Every item changed exactly once: version 2, two revisions, the tag added once. */
async function expectChangedOnce(sql: (text: string, params?: unknown[]) => Promise<any[]>, ids: string[], tag: string): Promise<void> {
  const rows = await sql(
    `SELECT i.version, cardinality(array_positions(i.tags, $2)) AS tagged, (SELECT count(*)::int FROM item_versions v WHERE v.item_id = i.id) AS revisions
       FROM items i WHERE i.id = ANY($1::uuid[])`,
    [ids, tag],
  );
  expect(rows).toHaveLength(ids.length);
  const tally = (f: (r: any) => unknown) => rows.reduce((m: Record<string, number>, r) => ({ ...m, [String(f(r))]: (m[String(f(r))] ?? 0) + 1 }), {});
  expect(tally((r) => r.version)).toEqual({ 2: ids.length });
  expect(tally((r) => r.revisions)).toEqual({ 2: ids.length });
  expect(tally((r) => r.tagged)).toEqual({ 1: ids.length });
}

/**
 * Service processes of their own (`node dist/src/main.js`) on one database and Redis prefix, for
 * tests that kill or freeze them; registers its hooks in the calling describe. `sql` reads that
 * database. A frozen process is thawed before it is stopped.
 */
function serviceProcesses(name: string, extraEnv: Record<string, string> = {}) {
  const database = uniqueName(`svc_bulk_${name}`);
  const prefix = `${uniqueName('svcb')}:`;
  const databaseUrl = `${PG_SERVER}/${database}`;
  const services: Service[] = [];
  let client: Client | undefined;

  beforeAll(() => ensureBuilt(), 180_000);
  afterAll(async () => {
    for (const s of services) s.child.kill('SIGCONT');
    await Promise.all(services.map((s) => s.stop()));
    await client?.end();
    await dropDatabase(database);
    await clearRedisPrefix(prefix);
  });

  return {
    databaseUrl,
    async start(): Promise<{ service: Service; url: string }> {
      const port = await freePort();
      const service = runService({
        NODE_ENV: 'test',
        DATABASE_URL: databaseUrl,
        REDIS_URL,
        REDIS_PREFIX: prefix,
        HOST: '127.0.0.1',
        PORT: String(port),
        LOG_LEVEL: 'silent',
        RATE_LIMIT_ENABLED: 'false',
        BULK_JOB_LEASE: '2s',
        ...extraEnv,
      });
      services.push(service);
      const url = `http://127.0.0.1:${port}`;
      await waitHealthy(service, url);
      return { service, url };
    },
    async sql(text: string, params?: unknown[]): Promise<any[]> {
      if (!client) {
        client = new Client({ connectionString: databaseUrl });
        await client.connect();
      }
      return (await client.query(text, params)).rows;
    },
  };
}

describe('a bulk job whose worker is SIGKILLed mid-job', () => {
  const { databaseUrl, start, sql } = serviceProcesses('kill');

  it('is resumed after a restart from its last committed chunk, every item changed exactly once', async () => {
    const first = await start();
    const { key } = (await http(first.url).post('/keys', { label: 'root' })).body;
    const api = http(first.url, key);
    const ids = [...(await createNotes(api, 'crash', 2 * CHUNK)), ...(await createNotes(api, 'crash', 200))];
    const lock = await lockItem(databaseUrl, ids[2 * CHUNK + 100]);

    const submitted = await api.post('/items/bulk_action', { action: 'update_tags', add_tags: ['done'], filter: { tags: ['crash'] }, async: true });
    expect(submitted.status).toBe(202);
    const held = await jobWhen(api, submitted.body.id, 'two chunks committed', (j) => j.processed === 2 * CHUNK);
    expect(held.status).toBe('in_progress');

    first.service.child.kill('SIGKILL');
    await first.service.exited;
    await lock.release();

    const second = await start();
    const done = await jobWhen(http(second.url, key), submitted.body.id, 'the job to complete after the restart', (j) => j.status === 'completed');
    expect(done).toMatchObject({ matched: ids.length, processed: ids.length, succeeded: ids.length, errored: 0 });
    expect(done.result).toMatchObject({ matched: ids.length, succeeded: ids.length, errored: 0, errors: [] });

    await expectChangedOnce(sql, ids, 'done');
    const [events] = await sql(`SELECT count(*)::int AS n FROM events WHERE name = 'item.updated'`);
    expect(events.n).toBe(ids.length);
  });
});

describe('bulk jobs when Redis loses the queue', () => {
  let t: TestApp;
  let admin: string;

  beforeAll(async () => {
    t = await startApp({ BULK_CONCURRENCY: '1', BULK_JOB_LEASE: '2s' });
    admin = (await bootstrapAdmin(t)).key;
  });
  afterAll(async () => t?.close());

  it('finishes the running job and re-queues the queued one: nothing lost, nothing done twice', async () => {
    const api = http(t.url, admin);
    const running = await createNotes(api, 'running', CHUNK + 100);
    const waiting = await createNotes(api, 'waiting', 50);
    const lock = await lockItem(t.databaseUrl, running[CHUNK + 10]);

    const a = await api.post('/items/bulk_action', { action: 'update_tags', add_tags: ['a-done'], filter: { tags: ['running'] }, async: true });
    await jobWhen(api, a.body.id, 'job A to hold at its second chunk', (j) => j.processed === CHUNK);
    // One worker slot, held by A: B waits in Bull's queue.
    const b = await api.post('/items/bulk_action', { action: 'update_tags', add_tags: ['b-done'], filter: { tags: ['waiting'] }, async: true });
    expect(b.status).toBe(202);

    await clearRedisPrefix(t.config.REDIS_PREFIX);
    expect((await t.http.get(`/items/bulk_action/jobs/${b.body.id}`).set(bearer(admin))).body.status).toBe('queued');
    await lock.release();

    await jobWhen(api, a.body.id, 'job A to complete', (j) => j.status === 'completed' && j.succeeded === running.length);
    await jobWhen(api, b.body.id, 'job B to be re-queued and complete', (j) => j.status === 'completed' && j.succeeded === waiting.length);
    await expectChangedOnce(t.sql, running, 'a-done');
    await expectChangedOnce(t.sql, waiting, 'b-done');
  });
});

describe('two instances', () => {
  let front: TestApp;
  let worker: TestApp;

  beforeAll(async () => {
    front = await startApp({ BULK_CONCURRENCY: '0' });
    worker = await startApp({ DATABASE_URL: front.databaseUrl, REDIS_PREFIX: front.config.REDIS_PREFIX });
  });
  afterAll(async () => {
    await worker?.app.close();
    await front?.close();
    await worker?.close();
  });

  it('run a job submitted on one of them on the other', async () => {
    const { key } = await bootstrapAdmin(front);
    const api = http(front.url, key);
    const ids = await createNotes(api, 'shared', 30);
    const submitted = await api.post('/items/bulk_action', { action: 'update_tags', add_tags: ['moved'], filter: { tags: ['shared'] }, async: true });
    expect(submitted.status).toBe(202);
    const done = await jobWhen(http(worker.url, key), submitted.body.id, 'the job to complete on the worker instance', (j) => j.status === 'completed');
    expect(done.succeeded).toBe(ids.length);
    await expectChangedOnce(front.sql, ids, 'moved');
  });
});

describe('an instance shut down gracefully mid-job', () => {
  // The sweeper passes every half lease: with a lease this long, nothing but the stopping
  // instance's hand-off gets the job to the other one within the test.
  const lease = { BULK_JOB_LEASE: '10m' };
  let a: TestApp;
  let b: TestApp | undefined;

  beforeAll(async () => {
    a = await startApp(lease);
  });
  afterAll(async () => {
    await b?.app.close();
    await a?.close();
    await b?.close();
  });

  it('hands its job on: another instance resumes it after the last committed chunk at once', async () => {
    const { key } = await bootstrapAdmin(a);
    const api = http(a.url, key);
    // One creation call per chunk, so that the job's chunks are their items in turn.
    const ids: string[] = [];
    for (const count of [CHUNK, CHUNK, 50]) ids.push(...(await createNotes(api, 'handoff', count)));
    const lock = await lockItem(a.databaseUrl, ids[CHUNK + 10]);

    const submitted = await api.post('/items/bulk_action', { action: 'update_tags', add_tags: ['handed'], filter: { tags: ['handoff'] }, async: true });
    expect(submitted.status).toBe(202);
    await jobWhen(api, submitted.body.id, 'the first chunk to commit on A', (j) => j.processed === CHUNK);
    b = await startApp({ ...lease, DATABASE_URL: a.databaseUrl, REDIS_PREFIX: a.config.REDIS_PREFIX });

    // A's second chunk waits for the row; the lock is let go only once A has begun to shut down.
    const worker = a.app.get(BulkWorker);
    const shutdown = worker.beforeApplicationShutdown.bind(worker);
    const stopping = new Promise<void>((resolve) =>
      jest.spyOn(worker, 'beforeApplicationShutdown').mockImplementation(() => {
        const stopped = shutdown();
        resolve();
        return stopped;
      }),
    );
    const closed = a.app.close();
    await stopping;
    await lock.release();

    const done = await jobWhen(http(b.url, key), submitted.body.id, 'instance B to complete the job', (j) => j.status === 'completed');
    await closed;
    expect(done).toMatchObject({ matched: ids.length, processed: ids.length, succeeded: ids.length, errored: 0 });
    await expectChangedOnce(b.sql, ids, 'handed');
  });
});

describe('a bulk job whose chunk finds its items locked by another session', () => {
  let t: TestApp;
  let admin: string;

  beforeAll(async () => {
    // A chunk then waits 2 s for a lock before trying again (bulk-runner.ts lockWaitMs).
    t = await startApp({ BULK_CONCURRENCY: '1', DATABASE_STATEMENT_TIMEOUT_MS: '4000' });
    admin = (await bootstrapAdmin(t)).key;
  });
  afterAll(async () => t?.close());

  /** A job adding `add` to two chunks of notes tagged `tag`, its first chunk committed and its second waiting on items held locked here. */
  async function blockedAtSecondChunk(tag: string, add: string) {
    const api = http(t.url, admin);
    const ids: string[] = [];
    for (const count of [CHUNK, CHUNK]) ids.push(...(await createNotes(api, tag, count)));
    const lock = await lockItem(t.databaseUrl, ids.slice(CHUNK, CHUNK + 50));
    const submitted = await api.post('/items/bulk_action', { action: 'update_tags', add_tags: [add], filter: { tags: [tag] }, async: true });
    expect(submitted.status).toBe(202);
    const jobId = submitted.body.id as string;
    await jobWhen(api, jobId, 'the first chunk to commit', (j) => j.processed === CHUNK);
    /** Once the lock is let go: the job completed, every item changed once. */
    const completes = async () => {
      expect((await api.get(`/items/bulk_action/jobs/${jobId}`)).body).toMatchObject({ status: 'in_progress', processed: CHUNK });
      await lock.release();
      const done = await jobWhen(api, jobId, 'the job to complete once the items are free', (j) => j.status !== 'in_progress');
      expect(done).toMatchObject({ status: 'completed', matched: ids.length, processed: ids.length, succeeded: ids.length, errored: 0 });
      await expectChangedOnce(t.sql, ids, add);
    };
    return { lock, completes };
  }

  it('waits for them, however many lock waits that takes, and completes once they are free', async () => {
    const { lock, completes } = await blockedAtSecondChunk('held', 'unheld');
    // Each wait is a transaction of its own: more of them than a chunk's attempts (3) before a job is failed.
    const waits = new Set<string>();
    await waitFor(async () => {
      for (const w of await waitingOn(t.sql, lock.pid)) waits.add(w.xact_start);
      return waits.size > 3;
    }, 'the chunk to wait for the locked items four times', 60_000, 50);
    await completes();
  });

  it('waits out its database session ended again and again, without counting it against the chunk\'s attempts', async () => {
    const { lock, completes } = await blockedAtSecondChunk('ended', 'survived');
    // More sessions ended than a chunk's attempts (3) before a job is failed.
    const ended = new Set<number>();
    while (ended.size < 4) {
      const [waiter] = await waitFor(async () => {
        const found = (await waitingOn(t.sql, lock.pid)).filter((w) => !ended.has(w.pid));
        return found.length ? found : undefined;
      }, 'the chunk to wait for the locked items in a new session', 60_000, 50);
      await t.sql('SELECT pg_terminate_backend($1)', [waiter.pid]);
      ended.add(waiter.pid);
    }
    await completes();
  });

  it('goes again after losing a deadlock, however many times, without counting it against the chunk\'s attempts', async () => {
    const api = http(t.url, admin);
    const ids = (await createNotes(api, 'deadlocked', 20)).sort();
    const [low, high] = [ids[0], ids.at(-1)!];
    // A session holding the chunk's last row, which then asks for its first, as a write to the
    // same items in the other order would: each time, the chunk (waiting longest) is the deadlock's loser.
    const other = new Client({ connectionString: t.databaseUrl });
    await other.connect();
    try {
      await other.query(`SET deadlock_timeout = '60s'`);
      await other.query('BEGIN');
      await other.query('SELECT 1 FROM items WHERE id = $1 FOR UPDATE', [high]);
      const submitted = await api.post('/items/bulk_action', { action: 'update_tags', add_tags: ['survived'], filter: { tags: ['deadlocked'] }, async: true });
      expect(submitted.status).toBe(202);
      const [{ pid }] = (await other.query('SELECT pg_backend_pid() AS pid')).rows;
      for (let round = 0; round < 4; round++) {
        await waitFor(async () => (await waitingOn(t.sql, pid)).length > 0, 'the chunk waiting for the last row', 60_000, 50);
        await other.query('SAVEPOINT cycle');
        await other.query('SELECT 1 FROM items WHERE id = $1 FOR UPDATE', [low]); // the chunk is rolled back, and lets it go
        await other.query('ROLLBACK TO SAVEPOINT cycle');
      }
      expect((await api.get(`/items/bulk_action/jobs/${submitted.body.id}`)).body).toMatchObject({ status: 'in_progress', processed: 0 });
      await other.query('ROLLBACK');
      const done = await jobWhen(api, submitted.body.id, 'the job to complete once the rows are free', (j) => j.status !== 'in_progress');
      expect(done).toMatchObject({ status: 'completed', processed: ids.length, succeeded: ids.length, errored: 0 });
      await expectChangedOnce(t.sql, ids, 'survived');
    } finally {
      await other.end();
    }
  });

  it('a direct run waits for a locked item no longer than a chunk would, then answers 409 conflict having changed nothing', async () => {
    const api = http(t.url, admin);
    const ids = await createNotes(api, 'direct-held', 20);
    const lock = await lockItem(t.databaseUrl, ids[10]);
    try {
      // The statement timeout is 4 s here: the run gives up at the 2 s lock wait, not at it (503).
      const res = await api.post('/items/bulk_action', { action: 'update_tags', add_tags: ['direct'], filter: { tags: ['direct-held'] } });
      expect([res.status, res.body.error?.code]).toEqual([409, 'conflict']);
    } finally {
      await lock.release();
    }
    expect(await t.sql(`SELECT 1 FROM items WHERE 'direct' = ANY(tags)`)).toEqual([]);
  });
});

describe('a bulk job whose chunk fails as an outage would while the database answers', () => {
  let t: TestApp;
  let admin: string;

  beforeAll(async () => {
    // Half a lease of such errors before they count: 1 s.
    t = await startApp({ BULK_CONCURRENCY: '1', BULK_JOB_LEASE: '2s' });
    admin = (await bootstrapAdmin(t)).key;
  });
  afterAll(async () => {
    await t?.sql(`DROP TRIGGER IF EXISTS doomed ON items; DROP FUNCTION IF EXISTS doomed()`);
    await t?.close();
  });

  it('is failed once the database has answered all along, not retried for ever', async () => {
    const api = http(t.url, admin);
    await createNotes(api, 'cursed', 3);
    // The chunk's own statement fails with a connection-class SQLSTATE, every time.
    await t.sql(`CREATE FUNCTION doomed() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RAISE EXCEPTION 'doomed' USING ERRCODE = '08006'; END $$`);
    await t.sql(`CREATE TRIGGER doomed BEFORE UPDATE ON items FOR EACH ROW WHEN ('doomed' = ANY (NEW.tags)) EXECUTE FUNCTION doomed()`);
    const submitted = await api.post('/items/bulk_action', { action: 'update_tags', add_tags: ['doomed'], filter: { tags: ['cursed'] }, async: true });
    expect(submitted.status).toBe(202);
    const done = await jobWhen(api, submitted.body.id, 'the job to end', (j) => j.status !== 'queued' && j.status !== 'in_progress');
    expect(done).toMatchObject({ status: 'failed', processed: 0 });
  });
});

describe('a bulk job whose worker freezes mid-chunk (SIGSTOP) holding its items', () => {
  // A frozen session's transaction is ended after twice the statement timeout (pg-guards.ts): 10 s.
  const { databaseUrl, start, sql } = serviceProcesses('stop', { DATABASE_STATEMENT_TIMEOUT_MS: '5000' });

  it('is completed by the instance that takes it over, every item changed exactly once', async () => {
    const first = await start();
    const { key } = (await http(first.url).post('/keys', { label: 'root' })).body;
    const api = http(first.url, key);
    const ids: string[] = [];
    for (const count of [CHUNK, CHUNK, 50]) ids.push(...(await createNotes(api, 'frozen', count)));

    // The first instance's second chunk locks its rows up to this one and waits for it.
    const lock = await lockItem(databaseUrl, ids[CHUNK + 10]);
    const submitted = await api.post('/items/bulk_action', { action: 'update_tags', add_tags: ['thawed'], filter: { tags: ['frozen'] }, async: true });
    expect(submitted.status).toBe(202);
    await jobWhen(api, submitted.body.id, 'the first chunk to commit', (j) => j.processed === CHUNK);
    const [chunkSession] = await waitFor(async () => {
      const w = await waitingOn(sql, lock.pid);
      return w.length ? w : undefined;
    }, 'the second chunk to wait for the locked item');

    // Frozen while waiting: let go, its session takes the rows and sits idle in its transaction.
    first.service.child.kill('SIGSTOP');
    await lock.release();
    await waitFor(async () => {
      const [s] = await sql(`SELECT state FROM pg_stat_activity WHERE pid = $1`, [chunkSession.pid]);
      return s?.state === 'idle in transaction';
    }, 'the frozen chunk to hold its rows idle in its transaction');

    const second = await start();
    const api2 = http(second.url, key);
    const done = await jobWhen(api2, submitted.body.id, 'the job to end on the second instance', (j) => j.status !== 'in_progress' && j.status !== 'queued');
    expect(done).toMatchObject({ status: 'completed', matched: ids.length, processed: ids.length, succeeded: ids.length, errored: 0 });
    expect(first.service.child.exitCode).toBeNull(); // still frozen: PostgreSQL ended its transaction

    // Thawed, the first instance finds its chunk's transaction gone and the job no longer its own.
    first.service.child.kill('SIGCONT');
    await first.service.stop();
    await expectChangedOnce(sql, ids, 'thawed');
    const [events] = await sql(`SELECT count(*)::int AS n FROM events WHERE name = 'item.updated'`);
    expect(events.n).toBe(ids.length);
    expect((await api2.get(`/items/bulk_action/jobs/${submitted.body.id}`)).body).toMatchObject({ status: 'completed', processed: ids.length });
  });
});
