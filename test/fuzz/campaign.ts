/**
 * Runs the fuzzer in two phases with fast-check and collects the result:
 *
 * 1. Survey: `fc.assert` over the request arbitrary with the fixed seed, FUZZ_RUNS runs (one
 *    request each) within FUZZ_SECONDS. The property records every failing response instead of
 *    throwing, so one run finds every defect class, not only the first; each failure keeps its
 *    run index, which is its fast-check replay path.
 * 2. Shrink: for each defect class the first recorded case is replayed with
 *    `fc.assert({seed, path})` and a property that fails only for that class (same oracles,
 *    status, error code and subtype), so fast-check shrinks it to a minimal request of the same
 *    class and prints its own counterexample report (seed, path, shrunk value).
 *
 * A defect class is what went wrong (oracles, status, code, subtype) plus the one feature of
 * the request that best names the trigger (NUL, deep nesting, a Content-Encoding, …), with
 * the routes it was seen on: the same fault on twenty routes is one class, not twenty.
 */
import fc from 'fast-check';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { FuzzConfig } from './config';
import { Fixtures } from './fixtures';
import { ClientRefusedError, FuzzResponse, send } from './http';
import { check, CheckContext, errorCode, features, Finding } from './oracles';
import { describeRequest, FuzzRequest } from './requests';
import { failureReport } from './replay';

export interface Failure {
  /** Oracles, status, code and subtype: what shrinking must preserve. */
  matchKey: string;
  /** matchKey plus the trigger feature: the class reported. */
  classKey: string;
  trigger: string;
  features: string[];
  routes: Map<string, number>;
  request: FuzzRequest;
  response: FuzzResponse;
  findings: Finding[];
  runIndex: number;
  count: number;
  /** After shrinking: fast-check's report and the minimal replay. */
  shrunk?: { fastCheckReport: string; replay: string };
}

export interface CampaignResult {
  requests: number;
  surveyRequests: number;
  surveyMs: number;
  shrinkMs: number;
  failures: Failure[];
  statusCounts: Record<string, number>;
  routeCounts: Record<string, number>;
  report: string;
  reportFile: string;
}

function matchKeyOf(res: FuzzResponse, findings: Finding[]): string {
  const oracles = [...new Set(findings.map((x) => x.oracle))].sort().join('+');
  const subtypes = [...new Set(findings.map((x) => x.subtype))].sort().join('; ');
  // Any 2xx to invalid input is the same fault (a replay may meet a 200 upsert instead of a 201).
  const status = res.error ? 'no response' : oracles === 'accepts-invalid' ? '2xx' : res.status;
  return `${oracles} | ${status} | ${errorCode(res)} | ${subtypes}`;
}

/** The one feature that best names the trigger, so that e.g. NUL and deep nesting stay apart. */
const PRIORITY = [
  /^protocol: /, /long (path|query)/, /NUL/, /lone surrogate/, /UTC offset|year 0001/, /invalid UTF-8|not UTF-8/, /nesting/, /Content-Encoding/, /bad percent/, /body > 1 MiB/,
  /Content-Type/, /prototype-key|operator-key/, /control char/, /noncharacter|bidi/, /long/, /method-|upper|slash|dot-segment|encoded-letter/, /garbage/,
];
function primaryFeature(fs: string[]): string {
  for (const re of PRIORITY) {
    const hit = fs.find((x) => re.test(x));
    if (hit) return hit;
  }
  return '(no hostile feature)';
}

/**
 * Known-good requests through the same sender (if these fail, every finding would be ours),
 * and one known leak (tenant B reading its own item) that the leak oracle must flag.
 */
async function selfCheck(ctx: CheckContext, cfg: FuzzConfig): Promise<void> {
  const f = ctx.fixtures;
  const plain = (persona: FuzzRequest['persona'], method: string, path: string, body?: unknown): FuzzRequest => ({
    persona, method, route: `${method} ${path}`, labels: ['self-check'], path, query: '',
    headers: body === undefined ? [] : [['Content-Type', 'application/json']],
    body: body === undefined ? undefined : Buffer.from(JSON.stringify(body)),
  });
  const cases: Array<[FuzzRequest, number]> = [
    [plain('none', 'GET', '/health'), 200],
    [plain('admin', 'GET', '/keys'), 200],
    [plain('member', 'GET', `/items/${f.a.itemIds[0]}`), 200],
    [plain('admin', 'POST', '/items', { type: 'core.note', properties: { title: 'self-check' } }), 201],
  ];
  for (const [r, status] of cases) {
    const res = await send(f.base, r, f, cfg.requestTimeoutMs);
    if (res.status !== status) throw new Error(`fuzzer self-check failed: ${r.method} ${r.path} gave ${res.status} ${res.error ?? res.body.toString('utf8').slice(0, 300)}, expected ${status}`);
  }
  const own = { ...plain('garbage', 'GET', `/items/${f.b.itemIds[0]}`), garbageAuth: `Bearer ${f.keys.adminB}` };
  const res = await send(f.base, own, f, cfg.requestTimeoutMs);
  if (res.status !== 200 || !check(own, res, ctx).some((x) => x.oracle === 'leak')) throw new Error('fuzzer self-check failed: the leak oracle does not see tenant B reading its own item');
}

export async function runCampaign(arb: fc.Arbitrary<FuzzRequest>, ctx: CheckContext, cfg: FuzzConfig, log: (s: string) => void): Promise<CampaignResult> {
  const f: Fixtures = ctx.fixtures;
  const classes = new Map<string, Failure>();
  const statusCounts: Record<string, number> = {};
  const routeCounts: Record<string, number> = {};
  let requests = 0;
  let runIndex = -1;

  const exchange = async (r: FuzzRequest) => {
    const res = await send(f.base, r, f, cfg.requestTimeoutMs);
    requests++;
    return { res, findings: check(r, res, ctx) };
  };

  await selfCheck(ctx, cfg);

  // Phase 1: survey. Record, never throw (except for fuzzer bugs), so the run covers everything.
  const surveyStart = Date.now();
  const survey = fc.asyncProperty(arb, async (r) => {
    runIndex++;
    const { res, findings } = await exchange(r);
    const status = res.error ? 'no response' : String(res.status);
    statusCounts[status] = (statusCounts[status] ?? 0) + 1;
    routeCounts[r.route] = (routeCounts[r.route] ?? 0) + 1;
    if (!findings.length) return;
    const fs = features(r);
    const matchKey = matchKeyOf(res, findings);
    const trigger = primaryFeature(fs);
    const classKey = `${matchKey} | ${trigger}`;
    // The operation, or the method actually sent on its path (PUT, FUZZ, … variants).
    const route = r.route.startsWith(`${r.method} `) ? r.route : `${r.method} ${r.route.replace(/^\S+ /, '')}`;
    let c = classes.get(classKey);
    if (!c) {
      c = { matchKey, classKey, trigger, features: fs, routes: new Map(), request: r, response: res, findings, runIndex, count: 0 };
      classes.set(classKey, c);
      log(`  new failure class #${classes.size} at run ${runIndex}: ${classKey} (${route})`);
    }
    c.count++;
    c.routes.set(route, (c.routes.get(route) ?? 0) + 1);
  });
  await fc.assert(survey, {
    seed: cfg.seed,
    numRuns: cfg.path ? 1 : cfg.runs,
    path: cfg.path,
    endOnFailure: true,
    plugins: [fc.interruptAfterTimeLimit(cfg.seconds * 1000)],
  });
  const surveyMs = Date.now() - surveyStart;
  const surveyRequests = requests;

  // Phase 2: shrink, the most frequent classes first, within the budget.
  const shrinkStart = Date.now();
  const failures = [...classes.values()].sort((a, b) => b.count - a.count);
  for (const failure of failures.slice(0, cfg.shrinkClasses)) {
    const remaining = cfg.shrinkSeconds * 1000 - (Date.now() - shrinkStart);
    if (remaining <= 500) break;
    let last: { r: FuzzRequest; res: FuzzResponse; findings: Finding[] } | undefined;
    const sameClass = fc.asyncProperty(arb, async (r) => {
      if (r.route !== failure.request.route) return; // stay on the route the class was found on
      const { res, findings } = await exchange(r);
      // Same fault, and still with the feature that named the class: otherwise a NUL case could
      // shrink into an unrelated deep-nesting case that happens to fail the same way.
      const sameTrigger = failure.trigger === '(no hostile feature)' || features(r).includes(failure.trigger);
      if (findings.length && matchKeyOf(res, findings) === failure.matchKey && sameTrigger) {
        last = { r, res, findings };
        throw new Error(failureReport(r, res, findings, f, cfg.outDir));
      }
    });
    // The survey's run index is the case's fast-check path (before any shrinking).
    const path = cfg.path ?? String(failure.runIndex);
    const budget = Math.min(remaining, Math.max(3000, (cfg.shrinkSeconds * 1000) / Math.min(cfg.shrinkClasses, failures.length)));
    try {
      await fc.assert(sameClass, { seed: cfg.seed, path, numRuns: 1, includeErrorInReport: true, plugins: [fc.interruptAfterTimeLimit(budget)] });
      // Not reproduced: the server's state moved on (an item's version, a deleted edge, …).
      failure.shrunk = {
        fastCheckReport: `(did not reproduce on replay of seed ${cfg.seed}, path "${path}": state-dependent; this is the survey's request)`,
        replay: failureReport(failure.request, failure.response, failure.findings, f, cfg.outDir),
      };
    } catch (err) {
      if (err instanceof ClientRefusedError) throw err;
      const message = (err as Error).message;
      const head = message.split('\n').filter((l) => /^Property failed|^\{ seed|^Counterexample|^Shrunk/.test(l)).join('\n');
      const l = last ?? { r: failure.request, res: failure.response, findings: failure.findings };
      failure.features = features(l.r);
      failure.shrunk = { fastCheckReport: head || message.slice(0, 600), replay: failureReport(l.r, l.res, l.findings, f, cfg.outDir) };
    }
  }
  const shrinkMs = Date.now() - shrinkStart;

  const report = formatReport({ requests, surveyRequests, surveyMs, shrinkMs, failures, statusCounts, routeCounts }, cfg, f);
  mkdirSync(cfg.outDir, { recursive: true });
  const reportFile = join(cfg.outDir, `report-seed${cfg.seed}-${Date.now()}.txt`);
  writeFileSync(reportFile, report);
  return { requests, surveyRequests, surveyMs, shrinkMs, failures, statusCounts, routeCounts, report, reportFile };
}

const routeList = (routes: Map<string, number>) =>
  [...routes.entries()].sort((a, b) => b[1] - a[1]).map(([r, n]) => `${r}×${n}`).join(', ');

function formatReport(r: Omit<CampaignResult, 'report' | 'reportFile'>, cfg: FuzzConfig, f: Fixtures): string {
  const out: string[] = [];
  out.push(`fuzz: seed ${cfg.seed}, ${r.requests} requests (${r.surveyRequests} in the survey): ${(r.surveyMs / 1000).toFixed(1)} s survey + ${(r.shrinkMs / 1000).toFixed(1)} s shrinking (profile ${cfg.profile}, FUZZ_RUNS=${cfg.runs}, FUZZ_SECONDS=${cfg.seconds})`);
  out.push(`statuses: ${Object.entries(r.statusCounts).sort().map(([k, v]) => `${k}×${v}`).join(' ')}`);
  if (!r.failures.length) {
    out.push('no failures');
    return out.join('\n');
  }
  out.push(`${r.failures.length} failure classes (oracles | status | code | what | trigger), most frequent first:`);
  r.failures.forEach((x, i) => out.push(`  #${i + 1} ${String(x.count).padStart(5)}× ${x.classKey}\n        on ${routeList(x.routes)}`));
  r.failures.forEach((x, i) => {
    out.push(`\n#${i + 1} ${x.classKey}`);
    out.push(`   features of the ${x.shrunk ? 'shrunk' : 'first'} request: ${x.features.join('; ') || 'none'}`);
    if (x.shrunk) {
      out.push(x.shrunk.fastCheckReport);
      out.push(x.shrunk.replay);
    } else {
      out.push(`(not shrunk: raise FUZZ_SHRINK_CLASSES/FUZZ_SHRINK_SECONDS) replay: FUZZ_SEED=${cfg.seed} FUZZ_PATH=${x.runIndex}`);
      out.push(`request: ${describeRequest(x.request)}`);
      out.push(failureReport(x.request, x.response, x.findings, f, cfg.outDir));
    }
  });
  return out.join('\n');
}
