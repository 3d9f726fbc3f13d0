/**
 * `npm run bench:search`: GET /search under load, against the same SQL run straight through
 * `pg` in the same run, on loopback only.
 *
 *   1. Seeds BENCH_ITEMS (default 100k) items of varied text into their own database
 *      (BENCH_DATABASE_URL, default .../svc_bench_search): titles, bodies, descriptions, names
 *      and tags drawn from a Zipf-distributed vocabulary, timestamps over two years, four
 *      core types. Rows go in with bulk INSERTs in batches, so the search trigger indexes them
 *      as it does any write. A database already seeded is reused (the bench key is kept in
 *      a bench_meta table), so only the first run pays for seeding.
 *   2. Starts the service as `npm start` does (the compiled dist/src/main.js; the script builds
 *      first) in a child process on 127.0.0.1, so the load generator does not share its event
 *      loop and the code measured is the code deployed.
 *   3. For each kind of query (one word, two words, a quoted phrase, a misspelt word that
 *      takes the trigram fallback, and a very common word as the stress case; see querySets),
 *      runs autocannon at 10 connections against GET /search, and the SQL the service runs for
 *      the same queries (search.sql.ts, the very function the service calls, which also brings
 *      the page's outgoing edges) from 10 concurrent `pg` clients, BENCH_DURATION seconds each
 *      (default 10) in BENCH_ROUNDS alternating rounds (default 5), and prints p50/p99 latency
 *      over all rounds (one percentile function for both paths), requests/s and service/raw,
 *      and where each path's CPU went per request (from /proc, so on Linux): the service's
 *      process, the PostgreSQL backends of the bench database, and this process (the load
 *      generator, or the raw path's pg client).
 *      Each path first runs unmeasured for BENCH_WARMUP seconds (default 3), and the service
 *      also runs every set that long once before the first is measured.
 *
 * Logs and rate limits are off in the service (LOG_LEVEL=silent, RATE_LIMIT_ENABLED=false).
 * `--queries` prints the query sets of a seeded database. Not a test: nothing is asserted.
 */
import 'reflect-metadata';
import autocannon from 'autocannon';
import { Client, Pool } from 'pg';
import { ItemFilter, itemWhere } from '../src/items/item-filter';
import { matchClause, parseSearch } from '../src/search/search-query';
import { fallbackApplies, searchStatement } from '../src/search/search.sql';
import { SearchStatements } from '../src/search/search-statements';
import { cpuMs, startService } from './service';
import { prng } from './text';

const DATABASE_URL = process.env.BENCH_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/svc_bench_search';
const REDIS_URL = process.env.BENCH_REDIS_URL ?? 'redis://127.0.0.1:6379';
const ITEMS = Number(process.env.BENCH_ITEMS ?? 100_000);
const DURATION = Number(process.env.BENCH_DURATION ?? 10);
const WARMUP = Number(process.env.BENCH_WARMUP ?? 3);
const ROUNDS = Math.max(1, Math.floor(Number(process.env.BENCH_ROUNDS ?? 5)));
/** BENCH_SETS: the query sets to run, by name, comma-separated ("two words,phrase"); default all. */
const ONLY = process.env.BENCH_SETS?.split(',').map((s) => s.trim());
const CONNECTIONS = 10;
/** Queries per set (the common-word stress set has 50): enough that one heavy draw does not make the tail. */
const QUERIES_PER_SET = 200;
const HALF_LIFE_DAYS = 30;
const BATCH = 1000;

// ------------------------------------------------------------------ the service, in a child

function serviceEnv(): Record<string, string> {
  return {
    DATABASE_URL,
    REDIS_URL,
    REDIS_PREFIX: 'svc_bench_search:',
    HOST: '127.0.0.1',
    LOG_LEVEL: 'silent',
    RATE_LIMIT_ENABLED: 'false',
    SEARCH_RECENCY_HALF_LIFE_DAYS: String(HALF_LIFE_DAYS),
  };
}

// ------------------------------------------------------------------ text generation

/** The commonest English words, at the top of the frequency ranking. */
const COMMON = (
  'the of and to in is was for that on with as by at from it his an were are which this be or has had not but ' +
  'their have one new first after also two they who its been more other all time year can into out only over ' +
  'about some would when there city team world state people work use may during between many under high could ' +
  'since such where through most school part known these both three later well system game company university ' +
  'country government family group season music found book film life public local water power house market ' +
  'health project report design history river station garden travel recipe kitchen meeting budget review plan ' +
  'note idea draft letter photo video paper research data model network server search index query result page'
).split(' ');
const FIRST = 'Ada Ben Chloe Dmitri Elena Farah Gus Hana Ivan Jun Kemal Lena Marco Nia Omar Priya Quinn Rosa Sven Tomas'.split(' ');
const LAST = 'Ahmed Berg Costa Dubois Eriksen Fischer Garcia Haddad Ito Jensen Kowalski Lopez Moreau Novak Okafor Park'.split(' ');
const TAGS = Array.from({ length: 40 }, (_, i) => ['work', 'home', 'idea', 'todo', 'read', 'travel', 'food', 'music'][i % 8] + (i < 8 ? '' : `-${i}`));

/**
 * The corpus: 50,000 word types, the common English words first and then real English words
 * (an-array-of-english-words, shuffled with a fixed seed), drawn with Zipf's law (s = 1.07, as
 * measured for English). Heaps' law puts the vocabulary of ~10M words of real text at 50-100k
 * types, so a much smaller vocabulary would make every word, and so every query, match
 * unrealistically many items; real words keep prefix and trigram statistics (which decide the
 * cost of the prefix match and of the typo fallback) close to those of real text.
 */
const VOCAB_SIZE = 50_000;
const ZIPF_S = 1.07;
/** Bump when the generated corpus changes: a seeded database of another version is reseeded. */
const CORPUS_VERSION = 4;

function vocabulary(): string[] {
  const rnd = prng(7);
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  const english = (require('an-array-of-english-words') as string[]).filter((w) => /^[a-z]{3,12}$/.test(w));
  for (let i = english.length - 1; i > 0; i--) {
    const j = Math.floor(rnd() * (i + 1));
    [english[i], english[j]] = [english[j], english[i]];
  }
  const words = new Set(COMMON);
  for (const w of english) {
    if (words.size >= VOCAB_SIZE) break;
    words.add(w);
  }
  return [...words];
}

const VOCAB = vocabulary();
/** Zipf cumulative weights over VOCAB's ranks. */
const CUMULATIVE = (() => {
  const w = VOCAB.map((_, r) => 1 / Math.pow(r + 2.7, ZIPF_S));
  const total = w.reduce((a, b) => a + b, 0);
  let acc = 0;
  return w.map((x) => (acc += x / total));
})();

function word(rnd: () => number): string {
  const x = rnd();
  let lo = 0;
  let hi = CUMULATIVE.length - 1;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if (CUMULATIVE[mid] < x) lo = mid + 1;
    else hi = mid;
  }
  return VOCAB[lo];
}

function sentence(rnd: () => number, min = 6, max = 18): string {
  const n = min + Math.floor(rnd() * (max - min + 1));
  const words = Array.from({ length: n }, () => word(rnd));
  words[0] = words[0][0].toUpperCase() + words[0].slice(1);
  return words.join(' ') + '.';
}

const paragraph = (rnd: () => number, min: number, max: number) =>
  Array.from({ length: min + Math.floor(rnd() * (max - min + 1)) }, () => sentence(rnd)).join(' ');
const title = (rnd: () => number) => sentence(rnd, 3, 8).slice(0, -1);
const pick = <T>(rnd: () => number, list: T[]) => list[Math.floor(rnd() * list.length)];

/** A version-4 UUID from the PRNG, so that a reseeded database holds the same ids (and querySets picks the same items). */
function uuid(rnd: () => number): string {
  const hex = Array.from({ length: 32 }, () => Math.floor(rnd() * 16).toString(16));
  hex[12] = '4';
  hex[16] = '89ab'[Math.floor(rnd() * 4)];
  const h = hex.join('');
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20)}`;
}

function item(rnd: () => number): { id: string; type: string; properties: Record<string, unknown>; ts: string; tier: string; tags: string[] } {
  const kind = rnd();
  let type: string;
  let properties: Record<string, unknown>;
  if (kind < 0.5) {
    type = 'core.note';
    properties = { title: title(rnd), body: paragraph(rnd, 2, 8) };
  } else if (kind < 0.7) {
    type = 'core.bookmark';
    properties = { url: `https://example.com/${word(rnd)}/${Math.floor(rnd() * 1e6)}`, title: title(rnd), description: paragraph(rnd, 1, 2) };
  } else if (kind < 0.9) {
    type = 'core.task';
    properties = { title: title(rnd), description: paragraph(rnd, 1, 3), status: pick(rnd, ['open', 'in_progress', 'done']), priority: Math.floor(rnd() * 6) };
  } else {
    type = 'core.contact';
    properties = { name: `${pick(rnd, FIRST)} ${pick(rnd, LAST)}`, organization: title(rnd), notes: paragraph(rnd, 1, 3) };
  }
  const tags = [...new Set(Array.from({ length: Math.floor(rnd() * 4) }, () => pick(rnd, TAGS)))];
  const ts = new Date(Date.now() - Math.floor(rnd() * 730 * 86_400_000)).toISOString();
  return { id: uuid(rnd), type, properties, ts, tier: rnd() < 0.8 ? 'library' : 'feed', tags };
}

// ------------------------------------------------------------------ seeding

async function ensureDatabase(): Promise<void> {
  const url = new URL(DATABASE_URL);
  const name = url.pathname.slice(1);
  url.pathname = '/postgres';
  const c = new Client({ connectionString: url.toString() });
  await c.connect();
  try {
    const { rowCount } = await c.query('SELECT 1 FROM pg_database WHERE datname = $1', [name]);
    if (!rowCount) await c.query(`CREATE DATABASE "${name.replace(/"/g, '""')}"`);
  } finally {
    await c.end();
  }
}

/** The bench key and its tenant: bootstrapped on the first run, then read back. */
async function benchKey(pool: Pool, url: string): Promise<{ key: string; tenantId: string; source: string }> {
  await pool.query(`CREATE TABLE IF NOT EXISTS bench_meta (name text PRIMARY KEY, value jsonb NOT NULL)`);
  const { rows } = await pool.query(`SELECT value FROM bench_meta WHERE name = 'key'`);
  if (rows[0]) return rows[0].value;
  const res = await fetch(`${url}/keys`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ label: 'bench' }) });
  if (res.status !== 201) throw new Error(`bootstrap failed (${res.status}); drop the bench database and run again`);
  const body = (await res.json()) as { key: string; tenant_id: string; source: string };
  const value = { key: body.key, tenantId: body.tenant_id, source: body.source };
  await pool.query(`INSERT INTO bench_meta (name, value) VALUES ('key', $1)`, [value]);
  return value;
}

async function seed(pool: Pool, tenantId: string, source: string): Promise<void> {
  const version = (await pool.query(`SELECT value FROM bench_meta WHERE name = 'corpus'`)).rows[0]?.value;
  if (version !== CORPUS_VERSION) {
    await pool.query('TRUNCATE items CASCADE');
    await pool.query(`INSERT INTO bench_meta (name, value) VALUES ('corpus', $1) ON CONFLICT (name) DO UPDATE SET value = $1`, [CORPUS_VERSION]);
  }
  const { rows } = await pool.query(`SELECT count(*)::int AS n FROM items WHERE tenant_id = $1`, [tenantId]);
  let have: number = rows[0].n;
  if (have >= ITEMS) {
    console.log(`reusing ${have} seeded items`);
    return;
  }
  const started = Date.now();
  console.log(`seeding ${ITEMS - have} items ...`);
  const insert = async (batchNo: number, size: number) => {
    const rnd = prng(1000 + batchNo);
    const batch = Array.from({ length: size }, () => item(rnd));
    await pool.query(
      `INSERT INTO items (tenant_id, id, type, properties, state, version, schema_version, source, source_id, "timestamp", tier,
                          tags, extensions, created_at, updated_at)
       SELECT $1, r.id, r.type, r.properties, 'active', 1, 1, $2, NULL, r.ts, r.tier, r.tags, '{}', r.ts, r.ts
         FROM jsonb_to_recordset($3::jsonb) AS r(id uuid, type text, properties jsonb, ts timestamptz, tier text, tags text[])`,
      [tenantId, source, JSON.stringify(batch)],
    );
  };
  // Two writers: the trigger's work (walking properties, building the vector) is per row.
  while (have < ITEMS) {
    const jobs = [];
    for (let w = 0; w < 2 && have < ITEMS; w++) {
      const size = Math.min(BATCH, ITEMS - have);
      jobs.push(insert(Math.floor(have / BATCH), size));
      have += size;
    }
    await Promise.all(jobs);
    if ((have / BATCH) % 10 === 0) process.stdout.write(`  ${have}\r`);
  }
  process.stdout.write('\n');
  await pool.query('VACUUM ANALYZE items');
  console.log(`seeded in ${((Date.now() - started) / 1000).toFixed(1)} s`);
}

// ------------------------------------------------------------------ CPU per process

interface Cpu {
  service: number;
  bench: number;
  postgres: number;
}

interface CpuMark {
  service: number;
  bench: number;
  /** CPU so far of each PostgreSQL backend connected to the bench database, by pid. */
  backends: Map<number, number>;
}

async function cpuMark(pool: Pool, servicePid: number): Promise<CpuMark> {
  const { rows } = await pool.query(`SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()`);
  return {
    service: cpuMs(servicePid),
    bench: cpuMs(process.pid),
    backends: new Map((rows as Array<{ pid: number }>).map(({ pid }) => [pid, cpuMs(pid)])),
  };
}

/** CPU ms spent between two marks by the service, this process and PostgreSQL (a backend new since `a` counts whole). */
function cpuSince(a: CpuMark, b: CpuMark): Cpu {
  let postgres = 0;
  for (const [pid, ms] of b.backends) postgres += ms - (a.backends.get(pid) ?? 0);
  return { service: b.service - a.service, bench: b.bench - a.bench, postgres };
}

// ------------------------------------------------------------------ queries

/**
 * What users search for, drawn from 600 seeded items (so that queries have something to find):
 * a content word (not among the 200 commonest), two content words of one item, two adjacent
 * words of an item's body as a quoted phrase, a title word with two letters swapped (so the
 * text search finds nothing and the trigram fallback runs), and, as the stress case, one of the
 * commonest words, which matches a large share of all items.
 */
async function querySets(pool: Pool, tenantId: string): Promise<Record<string, string[]>> {
  const rnd = prng(99);
  const rank = new Map(VOCAB.map((w, r) => [w, r]));
  const words = (s: unknown) => (typeof s === 'string' ? s.toLowerCase().split(/[^a-z]+/).filter(Boolean) : []);
  const content = (w: string) => (rank.get(w) ?? 0) >= 200;
  const { rows } = await pool.query(`SELECT properties FROM items WHERE tenant_id = $1 ORDER BY md5(id::text) LIMIT 600`, [tenantId]);
  const texts = rows.map((r: { properties: Record<string, unknown> }) => ({
    title: words(r.properties.title ?? r.properties.name),
    body: words(r.properties.body ?? r.properties.description ?? r.properties.notes),
  }));
  const oneWord: string[] = [];
  const twoWords: string[] = [];
  const phrase: string[] = [];
  const typo: string[] = [];
  for (const t of texts) {
    const all = [...t.title, ...t.body].filter(content);
    if (all.length) oneWord.push(pick(rnd, all));
    if (all.length >= 2) twoWords.push(`${all[0]} ${all[all.length - 1]}`);
    if (t.body.length >= 2) {
      const i = Math.floor(rnd() * (t.body.length - 1));
      phrase.push(`"${t.body[i]} ${t.body[i + 1]}"`);
    }
    const long = t.title.filter((w) => w.length >= 6 && content(w));
    if (long.length) {
      const w = pick(rnd, long);
      const i = 1 + Math.floor(rnd() * (w.length - 3));
      const misspelt = w.slice(0, i) + w[i + 1] + w[i] + w.slice(i + 2);
      if (!rank.has(misspelt) && !VOCAB.some((v) => v.startsWith(misspelt))) typo.push(misspelt);
    }
  }
  const common = Array.from({ length: 50 }, () => VOCAB[20 + Math.floor(rnd() * 180)]);
  const cap = (list: string[]) => list.slice(0, QUERIES_PER_SET);
  return { 'one word': cap(oneWord), 'two words': cap(twoWords), phrase: cap(phrase), 'typo (fallback)': cap(typo), 'common word (stress)': common };
}

/** What one measured stretch of one path gave: every request's latency, and the time it took. */
interface Sample {
  latencies: number[];
  seconds: number;
  errors: number;
}

interface Stats {
  p50: number;
  p99: number;
  rps: number;
  errors: number;
}

function percentile(sorted: number[], p: number): number {
  return sorted.length ? sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] : NaN;
}

/** Both paths' samples pooled the same way: one percentile function over every latency. */
function stats(samples: Sample[]): Stats {
  const latencies = samples.flatMap((s) => s.latencies).sort((a, b) => a - b);
  const seconds = samples.reduce((t, s) => t + s.seconds, 0);
  return { p50: percentile(latencies, 50), p99: percentile(latencies, 99), rps: latencies.length / seconds, errors: samples.reduce((t, s) => t + s.errors, 0) };
}

function viaService(url: string, key: string, queries: string[], duration: number): Promise<Sample> {
  let n = 0;
  const latencies: number[] = [];
  let errors = 0;
  return new Promise((resolve, reject) => {
    const instance = autocannon(
      {
        url,
        connections: CONNECTIONS,
        duration,
        headers: { authorization: `Bearer ${key}` },
        requests: [{ method: 'GET', setupRequest: (req) => ({ ...req, path: `/search?q=${encodeURIComponent(queries[n++ % queries.length])}` }) }],
      },
      (err, result) => (err ? reject(err) : resolve({ latencies, seconds: result.duration, errors: errors + result.errors })),
    );
    // responseTime is in ms with sub-ms precision, as the raw path's latencies are.
    instance.on('response', (_client, status: number, _bytes: number, responseTime: number) => {
      if (status >= 200 && status < 300) latencies.push(responseTime);
      else errors++;
    });
  });
}

/**
 * The service's SQL for the same queries, straight through pg, 10 at a time, prepared and
 * planned as the service runs it (SearchStatements, a pool of its own, the service's class).
 */
async function viaPg(statements: SearchStatements, tenantId: string, queries: string[], duration: number): Promise<Sample> {
  // What ItemsService.filterFor gives an admin with no filter parameters.
  const filter: ItemFilter = { edges: [], backrefs: [] };
  const latencies: number[] = [];
  let errors = 0;
  let n = 0;
  const deadline = Date.now() + duration * 1000;
  const worker = async () => {
    while (Date.now() < deadline) {
      const parsed = parseSearch(queries[n++ % queries.length]);
      const input = { tenantId, filter, parsed, limit: 20, offset: 0, halfLifeDays: HALF_LIFE_DAYS, showTags: true };
      const t0 = process.hrtime.bigint();
      try {
        const rows = await statements.query(tenantId, searchStatement({ ...input, mode: 'text' }));
        if (rows.length === 0 && fallbackApplies(parsed)) await statements.query(tenantId, searchStatement({ ...input, mode: 'similar' }));
        latencies.push(Number(process.hrtime.bigint() - t0) / 1e6);
      } catch {
        errors++;
      }
    }
  };
  const started = Date.now();
  await Promise.all(Array.from({ length: CONNECTIONS }, worker));
  return { latencies, seconds: (Date.now() - started) / 1000, errors };
}

/** How many items the queries of a set match, on average (for context). */
async function matchCounts(pool: Pool, tenantId: string, queries: string[]): Promise<number> {
  let total = 0;
  for (const q of queries) {
    const params: unknown[] = [];
    const where = itemWhere(tenantId, { edges: [], backrefs: [] }, params);
    const { rows } = await pool.query(`SELECT count(*)::int AS n FROM items i WHERE ${where} AND ${matchClause(q, tenantId, params)}`, params);
    total += rows[0].n;
  }
  return Math.round(total / queries.length);
}

async function main(): Promise<void> {
  await ensureDatabase();
  const { child, url } = await startService(serviceEnv());
  const pool = new Pool({ connectionString: DATABASE_URL, max: CONNECTIONS });
  const statements = new SearchStatements(DATABASE_URL, CONNECTIONS);
  try {
    const { key, tenantId, source } = await benchKey(pool, url);
    await seed(pool, tenantId, source);
    const fmt = (s: Stats) => `p50 ${s.p50.toFixed(1).padStart(6)} ms  p99 ${s.p99.toFixed(1).padStart(6)} ms  ${s.rps.toFixed(0).padStart(5)} req/s`;
    console.log(
      `\n${CONNECTIONS} connections, ${DURATION} s per path in ${ROUNDS} alternating rounds, ${ITEMS} items, limit 20, ` +
        `SEARCH_DB_POOL_SIZE ${process.env.SEARCH_DB_POOL_SIZE ?? 'default'} (node ${process.version})\n`,
    );
    const sets = Object.fromEntries(Object.entries(await querySets(pool, tenantId)).filter(([name]) => !ONLY || ONLY.includes(name)));
    // V8 keeps optimising the service's code for ~20 s after it starts: warm it on every set
    // first, so that the set measured first does not pay for that.
    if (WARMUP > 0) for (const queries of Object.values(sets)) await viaService(url, key, queries, WARMUP);
    for (const [kind, queries] of Object.entries(sets)) {
      const matches = await matchCounts(pool, tenantId, queries);
      // Run both paths unmeasured first, so that neither pays for cold caches.
      if (WARMUP > 0) {
        await viaService(url, key, queries, WARMUP);
        await viaPg(statements, tenantId, queries, WARMUP);
      }
      // Then in alternating rounds: this machine's speed drifts by 10-20% over a minute, which
      // would otherwise land on whichever path ran second.
      const serviceSamples: Sample[] = [];
      const rawSamples: Sample[] = [];
      const serviceCpu: Cpu = { service: 0, bench: 0, postgres: 0 };
      const rawCpu: Cpu = { service: 0, bench: 0, postgres: 0 };
      const measure = async (cpu: Cpu, run: () => Promise<Sample>): Promise<Sample> => {
        const before = await cpuMark(pool, child.pid!);
        const sample = await run();
        const spent = cpuSince(before, await cpuMark(pool, child.pid!));
        for (const k of ['service', 'bench', 'postgres'] as const) cpu[k] += spent[k];
        return sample;
      };
      for (let round = 0; round < ROUNDS; round++) {
        serviceSamples.push(await measure(serviceCpu, () => viaService(url, key, queries, DURATION / ROUNDS)));
        rawSamples.push(await measure(rawCpu, () => viaPg(statements, tenantId, queries, DURATION / ROUNDS)));
      }
      const service = stats(serviceSamples);
      const raw = stats(rawSamples);
      console.log(`${kind}  (~${matches} matches per query)`);
      console.log(`  GET /search  ${fmt(service)}${service.errors ? `  ${service.errors} errors` : ''}`);
      console.log(`  raw SQL      ${fmt(raw)}${raw.errors ? `  ${raw.errors} errors` : ''}`);
      console.log(`  service/raw  ${(service.rps / raw.rps).toFixed(2)}x throughput, p99 ${(service.p99 / raw.p99).toFixed(2)}x`);
      const per = (ms: number, samples: Sample[]) => (ms / samples.reduce((n, x) => n + x.latencies.length, 0)).toFixed(2);
      console.log(
        `  CPU ms/request  GET /search: service ${per(serviceCpu.service, serviceSamples)}, PostgreSQL ${per(serviceCpu.postgres, serviceSamples)}, ` +
          `load generator ${per(serviceCpu.bench, serviceSamples)}; raw SQL: PostgreSQL ${per(rawCpu.postgres, rawSamples)}, pg client ${per(rawCpu.bench, rawSamples)}\n`,
      );
    }
  } finally {
    await Promise.all([pool.end(), statements.end()]);
    child.kill('SIGTERM');
  }
}

/** `--queries`: print the query sets of an already seeded database, and nothing else. */
async function printQueries(): Promise<void> {
  const pool = new Pool({ connectionString: DATABASE_URL, max: 1 });
  try {
    const { rows } = await pool.query(`SELECT value FROM bench_meta WHERE name = 'key'`);
    console.log(JSON.stringify(await querySets(pool, rows[0].value.tenantId), null, 1));
  } finally {
    await pool.end();
  }
}

if (process.argv.includes('--queries')) {
  printQueries().catch((err) => {
    console.error(err);
    process.exit(1);
  });
} else {
  main().catch((err) => {
    console.error(err);
    process.exit(1);
  });
}
