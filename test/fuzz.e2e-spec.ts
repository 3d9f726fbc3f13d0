/**
 * Seeded, property-based HTTP fuzzer: drives every operation of GET /openapi.json with
 * generated input (valid-ish bodies and parameters from the schemas, plus malformed, oversized,
 * deeply nested, wrongly typed, Unicode-hostile and injection-shaped input, and raw protocol
 * abuse) as tenant A's admin, A's member, nobody and a garbage credential, against a service
 * that also holds tenant B's data, and checks every response: status < 500, the error
 * envelope, X-Request-Id, no trace of tenant B, no 2xx for input the document says is invalid,
 * 2xx bodies as documented. Then checks that the service still works and B's data is untouched.
 *
 * In `npm test` it runs a short, fixed-seed budget (2500 requests, at most 30 s of survey);
 * `npm run fuzz` runs the long profile (20000). See test/fuzz/config.ts for the knobs, and
 * FUZZ_SEED=<seed> FUZZ_PATH=<path> to replay one case from a report.
 */
import { bearer, startApp, TestApp } from './support/app';
import { runCampaign } from './fuzz/campaign';
import { loadFuzzConfig } from './fuzz/config';
import { Fixtures, seedFixtures } from './fuzz/fixtures';
import { OpenApiDoc, operations } from './fuzz/openapi';
import { BodyJudge, CheckContext, ResponseJudge } from './fuzz/oracles';
import { coverageBudget, makeWorld, requestArb } from './fuzz/requests';

const cfg = loadFuzzConfig();

function parseBytes(limit: string): number {
  const m = /^(\d+(?:\.\d+)?)\s*(b|kb|mb|gb)?$/i.exec(limit.trim());
  if (!m) throw new Error(`cannot read JSON_BODY_LIMIT ${limit}`);
  return Math.floor(Number(m[1]) * 1024 ** ['b', 'kb', 'mb', 'gb'].indexOf((m[2] ?? 'b').toLowerCase()));
}

describe('HTTP fuzzer (e2e)', () => {
  let t: TestApp;
  let fixtures: Fixtures;
  let doc: OpenApiDoc;

  beforeAll(async () => {
    // The harness turns rate limits off; said here too, because a 429 storm would hide everything.
    t = await startApp({ RATE_LIMIT_ENABLED: 'false' });
    fixtures = await seedFixtures(t);
    doc = (await t.http.get('/openapi.json').expect(200)).body;
  }, 120_000);
  afterAll(() => t?.close());

  it(
    'every operation of /openapi.json keeps the response contract under generated and hostile input',
    async () => {
      const ops = operations(doc);
      const world = makeWorld(doc, ops, fixtures, parseBytes(t.config.JSON_BODY_LIMIT));
      const ctx: CheckContext = { fixtures, opsById: new Map(ops.map((o) => [o.id, o])), bodyJudge: new BodyJudge(doc), responseJudge: new ResponseJudge(doc) };
      const log = (s: string) => process.stdout.write(`${s}\n`);
      log(`fuzz: ${ops.length} operations, seed ${cfg.seed}, up to ${cfg.runs} requests / ${cfg.seconds} s; replay bodies and report in ${cfg.outDir}`);
      const result = await runCampaign(requestArb(world), ctx, cfg, log);
      log(result.report.split('\n').slice(0, 2).join('\n'));
      log(`fuzz: full report in ${result.reportFile}`);

      if (!cfg.path) {
        // "Every operation": a route the generator never reached is a gap in the fuzzer, once
        // the survey was long enough to reach them all; a shorter one (a small FUZZ_RUNS, or
        // FUZZ_SECONDS running out first) can miss some by chance, which is only worth a warning.
        const missed = ops.map((o) => o.id).filter((id) => !result.routeCounts[id]);
        const sent = result.surveyRequests;
        const budget = coverageBudget(ops.length);
        const notReached = `${missed.length} of ${ops.length} operations not reached in ${sent} requests: ${missed.join(', ')}`;
        if (missed.length && sent < budget) {
          const stopped = sent < cfg.runs ? ` (FUZZ_SECONDS=${cfg.seconds} ran out first: raise it too)` : '';
          log(
            `fuzz: WARNING: ${notReached}. The budget is too small to reach every operation: coverage is checked from ` +
              `${budget} requests, about ${(budget / sent).toFixed(1)}x this run; use FUZZ_RUNS=${budget} or more${stopped}.`,
          );
        } else if (missed.length) {
          throw new Error(`${notReached}. ${sent} requests reach every operation but for a chance under 1 in 1000: the generator (test/fuzz/requests.ts) misses these.`);
        }
      }
      if (result.failures.length) throw new Error(result.report);
    },
    (cfg.seconds + cfg.shrinkSeconds + 90) * 1000,
  );

  it('still serves afterwards: /health is 200 and an item can be created and read back', async () => {
    await t.http.get('/health').expect(200);
    const created = await t.http.post('/items').set(bearer(fixtures.keys.adminA)).send({ type: 'core.note', properties: { title: 'after the fuzz' } });
    expect(created.status).toBe(201);
    const read = await t.http.get(`/items/${created.body.id}`).set(bearer(fixtures.keys.adminA)).expect(200);
    expect(read.body.properties).toEqual({ title: 'after the fuzz' });
  });

  it("left tenant B's items exactly as they were", async () => {
    for (const [id, before] of Object.entries(fixtures.bItemsBefore)) {
      const now = await t.http.get(`/items/${id}`).set(bearer(fixtures.keys.adminB)).expect(200);
      expect(now.body).toEqual(before);
    }
  });
});
