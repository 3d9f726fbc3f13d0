/**
 * Checks item properties off the event loop, in a worker thread that is stopped if a check runs
 * past CHECK_TIMEOUT_MS, when checking them in place could take long: long text under a schema
 * with patterns, or many values under a schema applying many schemas to each (property-validation.ts
 * `validatorFor`). RE2 matches in time linear in the
 * input, but with a factor as large as the pattern's compiled program once its DFA outgrows its
 * cache: `(.{1,1000})x`, within the schema limits, took 2.7 s over 50,000 ASCII characters and
 * 160 s over as many "é" (re2-wasm, measured 2026-11-26), in the process every tenant shares.
 * Wasm code stops when its worker is terminated (3 ms after `terminate()`, measured).
 *
 * One worker, one check at a time, taken in turn from each tenant with checks waiting (at most
 * MAX_WAITING_PER_OWNER each; more are 503), so one tenant's flood of slow checks delays another
 * tenant's check by at most one check per tenant waiting. The time limit runs from when a check is handed to a worker
 * that has loaded its code (a fresh one takes ~0.1 s to, and seconds under ts-jest), and stops while the worker compiles a validator
 * (COMPILE_TIMEOUT_MS for that), so a check is refused (400 `invalid_schema`) only for its own slowness; one that
 * waited in line longer than QUEUE_WAIT_MS behind others is 503 `service_unavailable`, to be
 * retried. A request that checks many items (batch writes, bulk actions) runs under a budget for
 * all its checks together (`withPatternBudget`), so that it cannot hold its transaction for a
 * second per item.
 */
import type { ErrorObject } from 'ajv';
import { AsyncLocalStorage } from 'node:async_hooks';
import { Worker } from 'node:worker_threads';
import { ApiError } from '../common/api-error';

export const CHECK_TIMEOUT_MS = 1000;
/** How long one validator compile in the worker may take (the schema limits keep it well under this). */
const COMPILE_TIMEOUT_MS = 10_000;
const QUEUE_WAIT_MS = 2000;
const MAX_WAITING_PER_OWNER = 16;

/** What the worker is asked and answers (pattern-check.worker.ts). */
export interface CheckRequest {
  id: number;
  cacheKey: string;
  schema: Record<string, unknown>;
  properties: unknown;
}
export type CheckAnswer =
  | { ready: true }
  /** A validator compile started (true) or ended (false) while checking request `id`: the time limit stops, then starts afresh. */
  | { id: number; compiling: boolean }
  | { id: number; errors: ErrorObject[] }
  | { id: number; apiError: { status: number; code: ApiError['code']; message: string; details?: Record<string, unknown> } }
  | { id: number; failure: string };

interface Budget {
  limitMs: number;
  leftMs: number;
}

interface Pending {
  owner: string;
  request: CheckRequest;
  queuedAt: number;
  budget?: Budget;
  resolve: (errors: ErrorObject[]) => void;
  reject: (err: Error) => void;
}

/** 400 invalid_schema: the type's schema cannot check the properties (here, or in property-validation.ts), and why. */
export const cannotCheck = (why: string) => ApiError.badRequest('invalid_schema', `The type's schema cannot check these properties: ${why}`);
const tooSlow = (ms: number) => cannotCheck(`checking them took more than ${ms} ms; send fewer or shorter values, or simplify the schema (its patterns, the schemas applying to each value)`);
const overBudget = (ms: number) =>
  cannotCheck(`this request's checks off the event loop took more than ${ms} ms in all; send fewer or smaller items, or simplify the schema`);
const busy = () => new ApiError(503, 'service_unavailable', 'Schema checks off the event loop are busy; retry shortly');

const budgets = new AsyncLocalStorage<Budget>();

/** A batch write's or a bulk chunk's time for pattern checks in the worker, all its items together. */
export const BATCH_PATTERN_BUDGET_MS = 3000;

/** Runs `work` with at most `ms` of pattern checks in the worker for all of it together. */
export function withPatternBudget<T>(ms: number, work: () => Promise<T>): Promise<T> {
  return budgets.run({ limitMs: ms, leftMs: ms }, work);
}

class PatternChecker {
  private worker?: Worker;
  /** Checks waiting, per owner, in the order the owners take turns (a Map keeps insertion order). */
  private readonly waiting = new Map<string, Pending[]>();
  private lastOwner?: string;
  private running?: Pending & { worker: Worker; startedAt: number; timer?: NodeJS.Timeout };
  /** Workers that have loaded their code: a check's time runs from then, not from a cold start. */
  private readonly ready = new WeakSet<Worker>();
  private nextId = 1;

  check(owner: string, cacheKey: string, schema: Record<string, unknown>, properties: unknown): Promise<ErrorObject[]> {
    const budget = budgets.getStore();
    if (budget && budget.leftMs <= 0) return Promise.reject(overBudget(budget.limitMs));
    const line = this.waiting.get(owner) ?? [];
    if (line.length >= MAX_WAITING_PER_OWNER) return Promise.reject(busy());
    return new Promise((resolve, reject) => {
      line.push({ owner, request: { id: this.nextId++, cacheKey, schema, properties }, queuedAt: Date.now(), budget, resolve, reject });
      this.waiting.set(owner, line);
      this.next();
    });
  }

  /**
   * The next check: the first waiting owner's, but not the owner just served while another
   * waits (one that arrived while it ran comes next); the owner served then goes last.
   */
  private take(): Pending | undefined {
    let chosen: [string, Pending[]] | undefined;
    for (const entry of this.waiting) {
      chosen ??= entry;
      if (entry[0] !== this.lastOwner) {
        chosen = entry;
        break;
      }
    }
    if (!chosen) return undefined;
    const [owner, line] = chosen;
    const job = line.shift()!;
    this.waiting.delete(owner);
    if (line.length) this.waiting.set(owner, line);
    this.lastOwner = owner;
    return job;
  }

  private next(): void {
    while (!this.running) {
      const job = this.take();
      if (!job) return;
      if (Date.now() - job.queuedAt > QUEUE_WAIT_MS) {
        job.reject(busy());
        continue;
      }
      try {
        this.start(job);
      } catch (err) {
        job.reject(err as Error); // the worker could not start, or the properties cannot be cloned
      }
    }
  }

  private start(job: Pending): void {
    const worker = this.started();
    worker.postMessage(job.request); // its answer comes on a later turn, once `running` is set
    this.running = { ...job, worker, startedAt: Date.now() };
    if (this.ready.has(worker)) this.startClock();
  }

  /**
   * The running check's time limit, from now: it is in a worker that has loaded its code. While
   * the worker compiles a validator (`compile`), the limit is COMPILE_TIMEOUT_MS for the compile
   * instead; the check's own limit, and what it takes of a budget, start afresh once it is done:
   * a check is refused for its own slowness only.
   */
  private startClock(compile = false): void {
    const running = this.running!;
    const { worker, request } = running;
    clearTimeout(running.timer);
    running.startedAt = Date.now();
    const limitMs = compile ? COMPILE_TIMEOUT_MS : Math.min(CHECK_TIMEOUT_MS, running.budget?.leftMs ?? Infinity);
    running.timer = setTimeout(() => {
      // Stuck in a match (or a compile): the worker goes, and the next check gets a fresh one.
      this.stop(worker);
      this.finish(worker, request.id, (p) =>
        p.reject(!compile && p.budget && p.budget.leftMs <= 0 ? overBudget(p.budget.limitMs) : tooSlow(compile ? COMPILE_TIMEOUT_MS : CHECK_TIMEOUT_MS)),
      );
    }, limitMs);
  }

  /** Settles the running check, if it is `id` on `worker`, and starts the next. */
  private finish(worker: Worker, id: number, settle: (p: Pending) => void): void {
    const running = this.running;
    if (!running || running.worker !== worker || running.request.id !== id) return;
    clearTimeout(running.timer);
    this.running = undefined;
    if (running.budget) running.budget.leftMs -= Date.now() - running.startedAt;
    settle(running);
    this.next();
  }

  private started(): Worker {
    if (this.worker) return this.worker;
    // Under ts-jest the sources are TypeScript: the worker compiles its own with ts-node.
    const ts = __filename.endsWith('.ts');
    const worker = new Worker(`${__dirname}/pattern-check.worker.${ts ? 'ts' : 'js'}`, {
      execArgv: ts ? ['--require', 'ts-node/register/transpile-only'] : [],
    });
    worker.on('message', (answer: CheckAnswer) => {
      if ('ready' in answer) {
        this.ready.add(worker);
        if (this.running?.worker === worker) this.startClock();
        return;
      }
      if ('compiling' in answer) {
        if (this.running?.worker === worker && this.running.request.id === answer.id) this.startClock(answer.compiling);
        return;
      }
      this.finish(worker, answer.id, (p) => {
        if ('errors' in answer) p.resolve(answer.errors);
        else if ('apiError' in answer) p.reject(new ApiError(answer.apiError.status, answer.apiError.code, answer.apiError.message, answer.apiError.details));
        else p.reject(new Error(answer.failure));
      });
    });
    const failed = (err: Error) => {
      this.stop(worker);
      if (this.running?.worker === worker) this.finish(worker, this.running.request.id, (p) => p.reject(err));
    };
    worker.on('error', failed);
    worker.on('exit', () => failed(new Error('the pattern check worker exited')));
    worker.unref(); // after the listeners, which would ref it again: it must not keep a stopping process alive
    this.worker = worker;
    return worker;
  }

  private stop(worker: Worker): void {
    if (this.worker === worker) this.worker = undefined;
    void worker.terminate();
  }
}

export const patternChecker = new PatternChecker();
