/**
 * EXPLAIN ANALYZE of the statements `GET /items?sort=properties.<path>` sends, on a tenant of
 * BENCH_ITEMS items (50,000) beside a small one: the figures in docs/performance.md ("Sorted by a
 * property"). Not a test and no timing assertion: it starts the app in this process on a fresh
 * database (as the e2e tests do), seeds the items by SQL, ANALYZEs, sends each listing over HTTP,
 * captures the page statement the service sent (the one bounded by byteBoundedPage) and prints
 * its plan's nodes and time; then shows what a property sort answers on a second instance whose
 * statement timeout it runs past. Run: `npx ts-node --transpile-only bench/sort-property-plans.ts`.
 */
import { DataSource } from 'typeorm';
import { bootstrapAdmin, bearer, createTenant, startApp } from '../test/support/app';

const ITEMS = Number(process.env.BENCH_ITEMS ?? 50_000);

interface Plan {
  'Node Type': string;
  'Sort Method'?: string;
  'Sort Space Used'?: number;
  'Actual Rows': number;
  'Actual Loops': number;
  'Actual Total Time': number;
  'Rows Removed by Filter'?: number;
  'Index Name'?: string;
  Plans?: Plan[];
}

function describe(node: Plan, depth = 0, out: string[] = []): string[] {
  const bits = [
    node['Node Type'],
    node['Index Name'] && `(${node['Index Name']})`,
    node['Sort Method'] && `[${node['Sort Method']}, ${node['Sort Space Used']} kB]`,
    `rows=${node['Actual Rows']}x${node['Actual Loops']}`,
    node['Rows Removed by Filter'] && `removed=${node['Rows Removed by Filter']}`,
    `${node['Actual Total Time'].toFixed(1)} ms`,
  ].filter(Boolean);
  if (depth < 14) out.push(`${'  '.repeat(depth)}${bits.join(' ')}`);
  for (const p of node.Plans ?? []) describe(p, depth + 1, out);
  return out;
}

async function main(): Promise<void> {
  const t = await startApp();
  try {
    const root = (await bootstrapAdmin(t)).key;
    const { key, tenantId } = await createTenant(t, root, 'plans');
    const small = await createTenant(t, root, 'plans-small');
    await t.http.post('/items').set(bearer(key)).send({ type: 'core.note', properties: { title: 'seed' } });
    await t.http.post('/items').set(bearer(small.key)).send({ type: 'core.note', properties: { title: 'small seed' } });
    // priority: a number 1-100 for 70%, a string for 10%, missing for 15%, null for 5%; city of 50; 10% archived; kind=rare 1 in 1,000.
    await t.sql(
      `INSERT INTO items (tenant_id, id, type, properties, state, source, "timestamp", tier, created_at, updated_at)
       SELECT $1, gen_random_uuid(), 'core.note',
              jsonb_strip_nulls(jsonb_build_object('title', 'item ' || n, 'body', repeat('lorem ipsum ', (20 + n % 40)::int),
                'kind', CASE WHEN n % 1000 = 1 THEN 'rare' ELSE 'common' END, 'address', jsonb_build_object('city', 'city ' || (n * 7919) % 50),
                'priority', CASE WHEN n % 20 < 14 THEN to_jsonb((n * 31) % 100 + 1) WHEN n % 20 < 16 THEN to_jsonb('p' || n % 7) END))
              || CASE WHEN n % 20 = 19 THEN '{"priority": null}'::jsonb ELSE '{}'::jsonb END,
              CASE WHEN n % 10 = 0 THEN 'archived' ELSE 'active' END, 's',
              now() - ((n * 7) % $2) * interval '1 minute', 'library', now() - n * interval '1 second', now() - ((n * 13) % $2) * interval '1 second'
         FROM generate_series(1::bigint, $2::bigint) n`,
      [tenantId, ITEMS],
    );
    await t.sql('ANALYZE items');

    const db = t.app.get(DataSource);
    const captured: Array<[string, unknown[]]> = [];
    const query = db.query.bind(db);
    db.query = (async (sql: string, params?: unknown[]) => {
      if (sql.includes('bytes_before')) captured.push([sql, params ?? []]);
      return query(sql, params);
    }) as typeof db.query;

    const run = async (label: string, k: string, q: Record<string, string | number>) => {
      captured.length = 0;
      const res = await t.http.get('/items').query({ limit: 50, ...q }).set(bearer(k));
      if (res.status !== 200) throw new Error(`${label}: ${res.status} ${JSON.stringify(res.body)}`);
      const [sql, params] = captured[0];
      const [{ 'QUERY PLAN': [plan] }] = await t.sql<{ 'QUERY PLAN': [{ Plan: Plan; 'Execution Time': number }] }>(`EXPLAIN (ANALYZE, FORMAT JSON) ${sql}`, params);
      console.log(`\n## ${label}: ${plan['Execution Time'].toFixed(1)} ms, ${res.body.items.length} items`);
      console.log(describe(plan.Plan).join('\n'));
      return res.body.next_cursor as string | null;
    };

    for (let round = 0; round < 2; round++) {
      console.log(`\n# round ${round + 1}`);
      await run('default sort (reference)', key, {});
      const next = await run('sort=properties.priority, first page', key, { sort: 'properties.priority' });
      await run('sort=properties.priority, page 2', key, { sort: 'properties.priority', cursor: next! });
      await run('sort=-properties.priority, first page', key, { sort: '-properties.priority' });
      await run('sort=properties.address.city', key, { sort: 'properties.address.city' });
      await run('sort=properties.priority, limit=100', key, { sort: 'properties.priority', limit: 100 });
      await run('sort=properties.priority&property=kind=rare', key, { sort: 'properties.priority', property: 'kind=rare' });
      await run('sort=properties.priority&since=(2,000 items)', key, { sort: 'properties.priority', since: new Date(Date.now() - 2000 * 60_000 / 7).toISOString() });
      await run('sort=properties.priority&state=all', key, { sort: 'properties.priority', state: 'all' });
      await run('sort=properties.priority, tenant of 1 item', small.key, { sort: 'properties.priority' });
      // The unset group: a cursor inside it.
      const unset = await t.sql<{ id: string }>(
        `SELECT id FROM items WHERE tenant_id = $1 AND state = 'active' AND nullif(properties #> '{priority}', 'null') IS NULL ORDER BY id LIMIT 1 OFFSET 10`,
        [tenantId],
      );
      const cursor = Buffer.from(JSON.stringify(['null', unset[0].id, 'items?sort=properties.priority'])).toString('base64url');
      await run('sort=properties.priority, a page among the unset', key, { sort: 'properties.priority', cursor });
    }

    // The failure mode of a tenant too large to sort in time: a second instance on this database
    // whose statement timeout (BENCH_TIMEOUT_MS, 50) is below what the sort takes here.
    const tight = await startApp({ DATABASE_URL: t.databaseUrl, DATABASE_STATEMENT_TIMEOUT_MS: process.env.BENCH_TIMEOUT_MS ?? '50' });
    try {
      for (const sort of ['-created_at', 'properties.priority']) {
        const res = await tight.http.get('/items').query({ sort }).set(bearer(key));
        console.log(`\n## sort=${sort} under a ${tight.config.DATABASE_STATEMENT_TIMEOUT_MS} ms statement timeout: ${res.status} ${res.headers['retry-after'] ? `Retry-After ${res.headers['retry-after']} ` : ''}${res.status === 200 ? '' : JSON.stringify(res.body)}`);
      }
    } finally {
      await tight.app.close(); // not tight.close(), which would drop the database under `t`
    }
  } finally {
    await t.close();
  }
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
