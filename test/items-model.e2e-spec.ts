/**
 * Model-based test of the items domain: fast-check draws sequences of commands (create and
 * natural-key upsert with tags, tier, extensions and edges, PATCH with fresh, stale and future
 * versions (properties, tags, tier, extensions), lifecycle moves, trash, tag and extension edits
 * through the metadata route, every bulk action run directly (purge, transition, update_tags,
 * update_tier, update_properties, update_timestamp; filters with free text), edge creation and
 * removal, reads with their revisions and edges, filtered and paged listings, GET /search for a
 * drawn word), where the member key reads only some extension namespaces and writes one,
 * runs them against the real service over HTTP as an admin and a member key of a fresh tenant,
 * and checks every answer against the in-memory model of test/support/items-model.ts. Each
 * run ends with a full listing of every state and a search for each of SEARCH_WORDS and PREFIX_WORD,
 * for both keys.
 *
 * Seeds and run counts are fixed so the test is repeatable and bounded (about 20-30 s of commands).
 * To explore further: MODEL_SEEDS (comma list), MODEL_RUNS, MODEL_MAX_COMMANDS; MODEL_SHRINK=1
 * shrinks a failure to a minimal command sequence (slow against a real service, so off by
 * default); MODEL_TRACE=1 prints how often each route answered each status and code.
 */
import fc from 'fast-check';
import type { Response } from 'supertest';
import { Api, api } from './items/helpers';
import { bearer, bootstrapAdmin, createKey, startApp, TestApp, uniqueName } from './support/app';
import { DEFAULT_TIER, EDGE_TYPE_BODIES, MEMBER_EDGES, MEMBER_EXTENSIONS, MEMBER_TYPES, Model, PREFIX_WORD, SEARCH_WORDS, STATES } from './support/items-model';
import { COMMANDS, compareListing, Real, Search } from './support/items-model-commands';

const SEEDS = (process.env.MODEL_SEEDS ?? '20261127,7,4242').split(',').map(Number);
const RUNS = Number(process.env.MODEL_RUNS ?? 10);
const MAX_COMMANDS = Number(process.env.MODEL_MAX_COMMANDS ?? 40);

/** Exploration aid (MODEL_TRACE): counts the answers by route, key, status and code. */
const tally = new Map<string, number>();
function traced(who: string, a: Api): Api {
  const count = async (method: string, path: string, p: Promise<Response>) => {
    const res = await p;
    const route = path.replace(/[0-9a-f-]{36}/g, ':id');
    const k = `${method} ${route} ${who} ${res.status} ${res.body?.error?.code ?? ''}`;
    tally.set(k, (tally.get(k) ?? 0) + 1);
    return res;
  };
  return {
    get: (path, q) => count('GET', path, a.get(path, q)),
    post: (path, b) => count('POST', path, a.post(path, b)),
    patch: (path, b) => count('PATCH', path, a.patch(path, b)),
    delete: (path) => count('DELETE', path, a.delete(path)),
  };
}
afterAll(() => {
  if (process.env.MODEL_TRACE) process.stderr.write([...tally].sort().map(([k, n]) => `${n}\t${k}`).join('\n') + '\n');
});

describe('items: model-based (fast-check against the running service)', () => {
  let t: TestApp;
  let root: string;

  beforeAll(async () => {
    t = await startApp();
    root = (await bootstrapAdmin(t)).key;
  });
  afterAll(() => t?.close());

  /** A fresh tenant per run, so the model starts empty: its admin key, a member key and the edge types. */
  async function setup(): Promise<Real> {
    const tenant = await t.http.post('/tenants').set(bearer(root)).send({ name: uniqueName('model') });
    if (tenant.status !== 201) throw new Error(`tenant: ${tenant.status} ${tenant.text}`);
    const adminKey = tenant.body.admin_key;
    const member = await createKey(t, adminKey.key, {
      label: 'member',
      role: 'member',
      type_permissions: MEMBER_TYPES,
      edge_permissions: MEMBER_EDGES,
      extension_permissions: MEMBER_EXTENSIONS,
      default_tier: DEFAULT_TIER.member,
    });
    for (const body of EDGE_TYPE_BODIES) {
      const res = await t.http.post('/edge-types').set(bearer(adminKey.key)).send(body);
      if (res.status !== 201) throw new Error(`edge type: ${res.status} ${res.text}`);
    }
    const as = { admin: api(t, adminKey.key), member: api(t, member.key) };
    if (process.env.MODEL_TRACE) for (const [who, a] of Object.entries(as)) as[who as 'admin'] = traced(who, a);
    return { as, source: { admin: adminKey.source, member: member.source } };
  }

  it.each(SEEDS)('seed %d: every answer agrees with the model', async (seed) => {
    await fc.assert(
      fc.asyncProperty(fc.commands(COMMANDS, { maxCommands: MAX_COMMANDS, size: 'max' }), async (cmds) => {
        const model = new Model();
        const real = await setup();
        await fc.asyncModelRun(() => ({ model, real }), cmds);
        if (process.env.MODEL_TRACE) process.stderr.write(`${[...cmds].length} commands: ${model.items.length} items, ${model.edges.length} edges\n`);
        for (const who of ['admin', 'member'] as const) {
          for (const state of [...STATES, 'all'] as const) await compareListing(model, real, who, { state }, 100, `final listing (${who}, ${state})`);
          for (const word of [...SEARCH_WORDS, PREFIX_WORD]) await new Search(who, word, 'all', undefined).run(model, real);
        }
      }),
      { seed, numRuns: RUNS, endOnFailure: !process.env.MODEL_SHRINK, verbose: 1 },
    );
  }, 180_000);
});
