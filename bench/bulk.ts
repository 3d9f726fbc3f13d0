/**
 * `npm run bench:bulk`: bulk actions (POST /items/bulk_action) against one raw SQL UPDATE of
 * the same rows in the same run, on loopback only.
 *
 *   1. Starts the compiled service (dist/src/main.js, as `npm start` runs it; the script builds
 *      first) in a child process against a fresh database (BENCH_DATABASE_URL, default
 *      .../svc_bench_bulk; dropped at the start of each run and left behind at the end for
 *      inspection), bootstraps an admin key, and writes BENCH_ITEMS (default 50,000) core.note
 *      items with a title and a body of English words, tagged `bench`, through POST /items/bulk
 *      (1000 a request, 2 at a time). The first BULK_SYNC_MAX of them are also tagged `sync`.
 *   2. Baselines, straight through `pg` on the same rows: one
 *      `UPDATE items SET tags = array_append(tags, 'raw-x') WHERE tenant_id = $1 AND type = 'core.note'`
 *      (it fires the search trigger, as the service's tag change does), and one
 *      `UPDATE items SET state = 'archived' ... AND state = 'active'` (no trigger: the trigger
 *      is BEFORE UPDATE OF properties, tags, type). Each is undone, unmeasured, afterwards.
 *   3. The job path: POST /items/bulk_action with `async: true` and `max_items` 50,000 for
 *      `update_tags` (add `job-x`, events on; then remove it with `emit_events: false`) and
 *      `transition` (to archived, events on; then back to active without events), each polled
 *      at GET /items/bulk_action/jobs/{id} until it ends. items/s from the job's own
 *      `started_at`..`finished_at`, and from the wall clock (submit to the poll that saw it
 *      end: also the match query, the job row, the queue). Printed as a ratio to the raw
 *      UPDATE's items/s. Target (the issue): the job path at least 0.25 of the raw UPDATE.
 *   4. The direct (synchronous) path: BENCH_SYNC_RUNS runs (default 30, after 3 unmeasured)
 *      of update_tags on exactly BULK_SYNC_MAX items (the `sync` tag), alternately adding and
 *      removing a tag so that each run changes every item; p50/p99 latency, and the same
 *      UPDATE run raw on the same rows as often, for comparison.
 *
 * For every measured phase it also prints what the phase wrote per item (item_versions and
 * events rows, WAL bytes: the WAL figure is cluster-wide, so anything else writing to this
 * PostgreSQL at the time inflates it) and where the CPU went (the service's process and the
 * bench database's PostgreSQL backends, from /proc, so on Linux). Between phases the items
 * are VACUUMed (autovacuum may be off) and the event relay is let drain, so that no phase
 * pays for the one before.
 *
 * Env: BENCH_DATABASE_URL, BENCH_REDIS_URL, BENCH_ITEMS, BENCH_SYNC_RUNS, BENCH_SEED_CONCURRENCY
 * (requests in flight while seeding, default 2), BULK_SYNC_MAX (passed to the service too),
 * BENCH_SERVICE_NODE_OPTIONS (bench/service.ts, e.g. '--cpu-prof --cpu-prof-dir=/tmp/prof'), and
 * BENCH_TRACE=1 to print each job's span on the monotonic clock (the clock of --cpu-prof's
 * timestamps), so that a profile can be cut to the jobs.
 * A run takes about 5 minutes on 2 cores, 2 of them seeding (POST /items/bulk is ~2.5 ms of
 * PostgreSQL CPU an item; its own row in the summary).
 * Logs and rate limits are off in the service. Not a test: nothing is asserted.
 */
import { cpus } from 'node:os';
import { Pool } from 'pg';
import { cpuMs, dropDatabase, machineBusyMs, percentile, startService, stopService } from './service';
import { prng } from './text';

const DATABASE_URL = process.env.BENCH_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/svc_bench_bulk';
const REDIS_URL = process.env.BENCH_REDIS_URL ?? 'redis://127.0.0.1:6379';
const ITEMS = Number(process.env.BENCH_ITEMS ?? 50_000);
const SYNC_MAX = Number(process.env.BULK_SYNC_MAX ?? 1000);
const SYNC_RUNS = Math.max(1, Math.floor(Number(process.env.BENCH_SYNC_RUNS ?? 30)));
const SYNC_WARMUP = 3;
/** Items per POST /items/bulk (its maximum), and requests in flight while seeding. */
const SEED_BATCH = 1000;
const SEED_CONCURRENCY = Math.max(1, Number(process.env.BENCH_SEED_CONCURRENCY ?? 2));
const POLL_MS = 100;

// ------------------------------------------------------------------ text


// eslint-disable-next-line @typescript-eslint/no-require-imports
const WORDS = (require('an-array-of-english-words') as string[]).filter((w) => /^[a-z]{3,10}$/.test(w)).slice(0, 20_000);

function sentence(rnd: () => number, min: number, max: number): string {
  const n = min + Math.floor(rnd() * (max - min + 1));
  return Array.from({ length: n }, () => WORDS[Math.floor(rnd() * WORDS.length)]).join(' ');
}

/** A note: a title of 3-8 words and a body of 2-6 sentences (~60 words, as bench/search.ts's notes). */
function note(rnd: () => number, n: number): Record<string, unknown> {
  const body = Array.from({ length: 2 + Math.floor(rnd() * 5) }, () => sentence(rnd, 6, 18) + '.').join(' ');
  return { type: 'core.note', properties: { title: sentence(rnd, 3, 8), body }, tags: n < SYNC_MAX ? ['bench', 'sync'] : ['bench'] };
}

// ------------------------------------------------------------------ CPU per process


// ------------------------------------------------------------------ measured phases

interface Mark {
  at: number;
  service: number;
  machine: number;
  backends: Map<number, number>;
  wal: string;
  versions: number;
  events: number;
}

interface Phase {
  label: string;
  items: number;
  /** The seconds items/s is computed from (the job's own timestamps for a job). */
  seconds: number;
  /** Submit to completion seen, for a job. */
  wallSeconds?: number;
  /** Per item: CPU µs of the service, of PostgreSQL (bench database backends), of the whole machine. */
  serviceUs: number;
  postgresUs: number;
  machineUs: number;
  walBytes: number;
  versionRows: number;
  eventRows: number;
}

class Meter {
  constructor(
    private readonly pool: Pool,
    private readonly servicePid: number,
  ) {}

  async mark(): Promise<Mark> {
    const { rows } = await this.pool.query(`SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()`);
    const [counts] = (
      await this.pool.query(
        `SELECT pg_current_wal_lsn()::text AS wal, (SELECT count(*) FROM item_versions)::int AS versions, (SELECT count(*) FROM events)::int AS events`,
      )
    ).rows;
    return {
      at: Date.now(),
      service: cpuMs(this.servicePid),
      machine: machineBusyMs(),
      backends: new Map((rows as Array<{ pid: number }>).map(({ pid }) => [pid, cpuMs(pid)])),
      wal: counts.wal,
      versions: counts.versions,
      events: counts.events,
    };
  }

  /** What happened between two marks, per item (a backend new since `a` counts whole; the pool's own backend is excluded by `b`). */
  async phase(label: string, items: number, seconds: number, a: Mark, b: Mark, wallSeconds?: number): Promise<Phase> {
    let postgres = 0;
    for (const [pid, ms] of b.backends) postgres += ms - (a.backends.get(pid) ?? 0);
    const { rows } = await this.pool.query(`SELECT pg_wal_lsn_diff($1::pg_lsn, $2::pg_lsn)::float8 AS bytes`, [b.wal, a.wal]);
    const per = (x: number) => (items ? x / items : NaN);
    return {
      label,
      items,
      seconds,
      wallSeconds,
      serviceUs: per((b.service - a.service) * 1000),
      postgresUs: per(postgres * 1000),
      machineUs: per((b.machine - a.machine) * 1000),
      walBytes: per(rows[0].bytes),
      versionRows: per(b.versions - a.versions),
      eventRows: per(b.events - a.events),
    };
  }
}


// ------------------------------------------------------------------ the run

interface Api {
  call<T>(method: string, path: string, body?: unknown): Promise<{ status: number; body: T }>;
}

interface JobDto {
  id: string;
  status: string;
  matched: number;
  processed: number;
  succeeded: number;
  errored: number;
  started_at?: string;
  finished_at?: string;
  error?: string;
}

async function seed(api: Api): Promise<void> {
  const started = Date.now();
  let next = 0;
  let done = 0;
  const writer = async () => {
    for (;;) {
      const from = next;
      if (from >= ITEMS) return;
      next += SEED_BATCH;
      const rnd = prng(1000 + from / SEED_BATCH);
      const items = Array.from({ length: Math.min(SEED_BATCH, ITEMS - from) }, (_, i) => note(rnd, from + i));
      const { status, body } = await api.call<{ results: Array<{ status: string; error?: unknown }> }>('POST', '/items/bulk', { mode: 'upsert', items });
      const failed = body.results?.find((r) => r.status === 'error');
      if (status !== 200 || failed) throw new Error(`seeding failed (${status}): ${JSON.stringify(failed ?? body).slice(0, 500)}`);
      done += items.length;
      process.stdout.write(`  seeded ${done}\r`);
    }
  };
  await Promise.all(Array.from({ length: SEED_CONCURRENCY }, writer));
  console.log(`seeded ${ITEMS} items through POST /items/bulk in ${((Date.now() - started) / 1000).toFixed(1)} s`);
}

/** Waits until the event relay has dispatched every event, then VACUUMs what the phases write. */
async function settle(pool: Pool): Promise<void> {
  const deadline = Date.now() + 300_000;
  while (Date.now() < deadline) {
    const { rows } = await pool.query(`SELECT count(*)::int AS n FROM events WHERE dispatched_at IS NULL`);
    if (rows[0].n === 0) break;
    await new Promise((r) => setTimeout(r, 200));
  }
  await pool.query('VACUUM ANALYZE items');
  await pool.query('VACUUM ANALYZE item_versions');
  await pool.query('VACUUM ANALYZE events');
}

async function raw(pool: Pool, meter: Meter, label: string, sql: string, params: unknown[], undo: string): Promise<Phase> {
  await settle(pool);
  const client = await pool.connect();
  try {
    const a = await meter.mark();
    const t0 = process.hrtime.bigint();
    const { rowCount } = await client.query(sql, params);
    const seconds = Number(process.hrtime.bigint() - t0) / 1e9;
    const b = await meter.mark();
    await client.query(undo, params);
    return meter.phase(label, rowCount ?? 0, seconds, a, b);
  } finally {
    client.release();
  }
}

async function job(api: Api, pool: Pool, meter: Meter, label: string, action: Record<string, unknown>): Promise<Phase> {
  await settle(pool);
  const a = await meter.mark();
  const submitted = Date.now();
  const { status, body } = await api.call<JobDto>('POST', '/items/bulk_action', { ...action, max_items: 50_000, async: true });
  if (status !== 202) throw new Error(`${label}: expected 202, got ${status} ${JSON.stringify(body).slice(0, 500)}`);
  let j = body;
  while (!['completed', 'failed', 'cancelled'].includes(j.status)) {
    await new Promise((r) => setTimeout(r, POLL_MS));
    j = (await api.call<JobDto>('GET', `/items/bulk_action/jobs/${body.id}`)).body;
  }
  const wall = (Date.now() - submitted) / 1000;
  // BENCH_TRACE: the job's span on the monotonic clock (µs), which V8's --cpu-prof timestamps also use, to cut a profile to it.
  if (process.env.BENCH_TRACE) console.log(`  trace ${label}: monotonic µs ${(process.hrtime.bigint() / 1000n) - BigInt(Math.round(wall * 1e6))}..${process.hrtime.bigint() / 1000n}`);
  const b = await meter.mark();
  if (j.status !== 'completed' || j.errored) console.log(`  ${label}: job ${j.status}, ${j.errored} errored ${j.error ?? ''}`);
  const seconds = (Date.parse(j.finished_at!) - Date.parse(j.started_at!)) / 1000;
  const phase = await meter.phase(label, j.succeeded, seconds, a, b, wall);
  const drainStart = Date.now();
  await settle(pool);
  if (action.emit_events !== false) console.log(`  ${label}: event relay drained ${((Date.now() - drainStart) / 1000).toFixed(1)} s after the job (and VACUUM)`);
  return phase;
}

async function main(): Promise<void> {
  await dropDatabase(DATABASE_URL);
  const { child, url } = await startService({
    DATABASE_URL,
    REDIS_URL,
    REDIS_PREFIX: `svc_bench_bulk_${process.pid}:`,
    LOG_LEVEL: 'silent',
    RATE_LIMIT_ENABLED: 'false',
    BULK_SYNC_MAX: String(SYNC_MAX),
  });
  const pool = new Pool({ connectionString: DATABASE_URL, max: 2 });
  const machineStart = machineBusyMs();
  const runStart = Date.now();
  try {
    const res = await fetch(`${url}/keys`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ label: 'bench' }) });
    if (res.status !== 201) throw new Error(`bootstrap failed (${res.status})`);
    const { key, tenant_id: tenantId } = (await res.json()) as { key: string; tenant_id: string };
    const api: Api = {
      async call<T>(method: string, path: string, body?: unknown) {
        const r = await fetch(`${url}${path}`, {
          method,
          headers: { authorization: `Bearer ${key}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
          body: body === undefined ? undefined : JSON.stringify(body),
        });
        return { status: r.status, body: (await r.json()) as T };
      },
    };

    const meter = new Meter(pool, child.pid!);
    const seedA = await meter.mark();
    await seed(api);
    const seedB = await meter.mark();
    const seedPhase = await meter.phase('seeding: POST /items/bulk (events)', ITEMS, (seedB.at - seedA.at) / 1000, seedA, seedB);
    const notes = [tenantId];

    // Raw baselines first (they warm the table and its indexes for both paths alike).
    const rawTags = await raw(
      pool, meter, 'raw UPDATE tags (array_append)',
      `UPDATE items SET tags = array_append(tags, 'raw-x') WHERE tenant_id = $1 AND type = 'core.note'`, notes,
      `UPDATE items SET tags = array_remove(tags, 'raw-x') WHERE tenant_id = $1 AND type = 'core.note'`,
    );
    const rawState = await raw(
      pool, meter, 'raw UPDATE state -> archived',
      `UPDATE items SET state = 'archived' WHERE tenant_id = $1 AND type = 'core.note' AND state = 'active'`, notes,
      `UPDATE items SET state = 'active' WHERE tenant_id = $1 AND type = 'core.note' AND state = 'archived'`,
    );

    const jobTags = await job(api, pool, meter, 'job update_tags (+job-x, events)', {
      action: 'update_tags', add_tags: ['job-x'], filter: { type: 'core.note' },
    });
    const jobTagsQuiet = await job(api, pool, meter, 'job update_tags (-job-x, no events)', {
      action: 'update_tags', remove_tags: ['job-x'], filter: { type: 'core.note' }, emit_events: false,
    });
    const jobState = await job(api, pool, meter, 'job transition -> archived (events)', {
      action: 'transition', to_state: 'archived', filter: { type: 'core.note', state: 'active' },
    });
    const jobStateQuiet = await job(api, pool, meter, 'job transition -> active (no events)', {
      action: 'transition', to_state: 'active', filter: { type: 'core.note', state: 'archived' }, emit_events: false,
    });

    // The direct path: exactly BULK_SYNC_MAX items (tagged `sync`), alternately adding and removing a tag.
    await settle(pool);
    const syncBody = (n: number) => ({
      action: 'update_tags',
      ...(n % 2 === 0 ? { add_tags: ['sync-x'] } : { remove_tags: ['sync-x'] }),
      filter: { type: 'core.note', tags: ['sync'] },
      max_items: SYNC_MAX,
    });
    const syncMs: number[] = [];
    let syncA: Mark | undefined;
    for (let n = 0; n < SYNC_WARMUP + SYNC_RUNS; n++) {
      if (n === SYNC_WARMUP) syncA = await meter.mark();
      const t0 = process.hrtime.bigint();
      const { status, body } = await api.call<{ succeeded: number; errored: number }>('POST', '/items/bulk_action', syncBody(n));
      const ms = Number(process.hrtime.bigint() - t0) / 1e6;
      if (status !== 200 || body.succeeded !== SYNC_MAX) throw new Error(`sync run: ${status} ${JSON.stringify(body).slice(0, 300)}`);
      if (n >= SYNC_WARMUP) syncMs.push(ms);
    }
    const syncB = await meter.mark();
    const syncPhase = await meter.phase(`direct update_tags x${SYNC_RUNS} (events)`, SYNC_MAX * SYNC_RUNS, syncMs.reduce((a, b) => a + b, 0) / 1000, syncA!, syncB);
    // The same change of the same rows, raw, as often (the relay's work of the direct runs drains first).
    await settle(pool);
    const rawSyncMs: number[] = [];
    const syncIds = (await pool.query(`SELECT id FROM items WHERE tenant_id = $1 AND tags @> '{sync}'`, notes)).rows.map((r: { id: string }) => r.id);
    for (let n = 0; n < SYNC_WARMUP + SYNC_RUNS; n++) {
      const change = n % 2 === 0 ? `array_append(tags, 'sync-y')` : `array_remove(tags, 'sync-y')`;
      const t0 = process.hrtime.bigint();
      await pool.query(`UPDATE items SET tags = ${change} WHERE tenant_id = $1 AND id = ANY($2::uuid[])`, [tenantId, syncIds]);
      if (n >= SYNC_WARMUP) rawSyncMs.push(Number(process.hrtime.bigint() - t0) / 1e6);
    }

    // ---------------------------------------------------------------- summary
    const rate = (p: Phase) => p.items / p.seconds;
    const f0 = (x: number) => (Number.isFinite(x) ? x.toFixed(0) : '-');
    const f2 = (x: number) => (Number.isFinite(x) ? x.toFixed(2) : '-');
    console.log(
      `\n${ITEMS} core.note items, CHUNK_SIZE 500, BULK_SYNC_MAX ${SYNC_MAX}, BULK_CONCURRENCY ${process.env.BULK_CONCURRENCY ?? 'default'} ` +
        `(node ${process.version}, ${cpus().length} CPUs)\n`,
    );
    const head = ['phase', 'items', 's', 'items/s', 'vs raw', 'wall s', 'versions', 'events', 'WAL B', 'svc µs', 'pg µs', 'host µs'];
    const widths = [38, 7, 7, 8, 7, 7, 9, 7, 7, 7, 7, 8];
    const line = (cells: string[]) => console.log(cells.map((c, i) => (i === 0 ? c.padEnd(widths[i]) : c.padStart(widths[i]))).join(' '));
    line(head);
    const row = (p: Phase, base?: Phase) =>
      line([
        p.label, String(p.items), p.seconds.toFixed(2), f0(rate(p)), base ? f2(rate(p) / rate(base)) : '', p.wallSeconds ? p.wallSeconds.toFixed(2) : '',
        f2(p.versionRows), f2(p.eventRows), f0(p.walBytes), f0(p.serviceUs), f0(p.postgresUs), f0(p.machineUs),
      ]);
    row(rawTags);
    row(jobTags, rawTags);
    row(jobTagsQuiet, rawTags);
    row(rawState);
    row(jobState, rawState);
    row(jobStateQuiet, rawState);
    row(syncPhase);
    row(seedPhase);
    console.log(
      `  (per item: versions/events = rows written to item_versions/events; WAL B = WAL bytes, cluster-wide; svc/pg/host µs = CPU of the ` +
        `service, of the bench database's backends, of the whole machine. "vs raw": items/s from the job's started_at..finished_at over the ` +
        `raw UPDATE's; target >= 0.25)`,
    );
    const wallRatio = (p: Phase, base: Phase) => f2(p.items / p.wallSeconds! / rate(base));
    console.log(`\njob path, wall clock (submit to completion seen), vs raw: update_tags ${wallRatio(jobTags, rawTags)} (no events ${wallRatio(jobTagsQuiet, rawTags)}), ` +
      `transition ${wallRatio(jobState, rawState)} (no events ${wallRatio(jobStateQuiet, rawState)})`);
    console.log(
      `direct path, update_tags on ${SYNC_MAX} items, ${SYNC_RUNS} runs: p50 ${percentile(syncMs, 50).toFixed(0)} ms, p99 ${percentile(syncMs, 99).toFixed(0)} ms, ` +
        `${f0(SYNC_MAX / (percentile(syncMs, 50) / 1000))} items/s at p50; the same raw UPDATE of those rows: p50 ${percentile(rawSyncMs, 50).toFixed(0)} ms, ` +
        `p99 ${percentile(rawSyncMs, 99).toFixed(0)} ms (direct/raw at p50 ${(percentile(syncMs, 50) / percentile(rawSyncMs, 50)).toFixed(1)}x)`,
    );
    const busy = (machineBusyMs() - machineStart) / (Date.now() - runStart);
    console.log(`whole run ${((Date.now() - runStart) / 1000).toFixed(0)} s, machine busy ${busy.toFixed(2)} of ${cpus().length} CPUs on average`);
  } finally {
    await pool.end();
    await stopService(child);
  }
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
